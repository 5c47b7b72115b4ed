"""JSON decoding for arbitrarily deep documents.

``json.loads`` recurses once per nesting level and fails (RecursionError, or on 3.12+ a refusal) on
trees a few thousand levels deep, which real pyinstrument traces can be. The fast C decoder is tried
first; only documents too deep for it go through the explicit-stack decoder below, which reuses the
standard library's own string scanner and number grammar so both paths accept the same JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since Python 2.6, untyped

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def loads_deep(data: bytes | str) -> object:
    """Decode JSON like ``json.loads``; raises ValueError (or UnicodeDecodeError) on bad input."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text)
    except RecursionError:
        return _loads_iterative(text)


def json_document(data: bytes, bad: Callable[[str], Exception]) -> object:
    """The JSON document in ``data``, or ``bad(reason)`` raised: the file is empty, or not JSON (any depth
    decodes: see ``loads_deep``). Readers of JSON formats check the document's shape themselves."""
    if not data.strip():
        raise bad("the file is empty")
    try:
        return loads_deep(data)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise bad(f"malformed JSON ({e})") from e


def _error(message: str, pos: int) -> ValueError:
    return ValueError(f"{message} at char {pos}")


def _loads_iterative(text: str) -> object:
    # Containers under construction: (container, pending object key or None).
    stack: list[list] = []
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    result: object = None
    have_result = False
    expect_value = True
    while True:
        if expect_value:
            if pos >= len(text):
                raise _error("unexpected end of data", pos)
            ch = text[pos]
            if ch == "{":
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                if text.startswith("}", pos):
                    value: object
                    value, pos = {}, pos + 1
                else:
                    stack.append([{}, None])
                    pos = _read_key(text, pos, stack[-1])
                    continue
            elif ch == "[":
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                if text.startswith("]", pos):
                    value, pos = [], pos + 1
                else:
                    stack.append([[], None])
                    continue
            elif ch == '"':
                value, pos = scanstring(text, pos + 1)
            else:
                value, pos = _scalar(text, pos)
            # A complete value: attach it to its container, or it is the document.
            if stack:
                container, key = stack[-1]
                if key is None:
                    container.append(value)
                else:
                    container[key] = value
            else:
                result, have_result = value, True
            expect_value = False
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not stack:
            if pos != len(text):
                raise _error("extra data", pos)
            assert have_result
            return result
        container, _ = stack[-1]
        ch = text[pos] if pos < len(text) else ""
        if ch == ",":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if isinstance(container, dict):
                pos = _read_key(text, pos, stack[-1])
            expect_value = True
        elif ch == ("}" if isinstance(container, dict) else "]"):
            stack.pop()
            pos += 1
            if stack:
                parent, key = stack[-1]
                if key is None:
                    parent.append(container)
                else:
                    parent[key] = container
            else:
                result, have_result = container, True
        else:
            raise _error("expected ',' or a closing bracket", pos)


def _read_key(text: str, pos: int, frame: list) -> int:
    if not text.startswith('"', pos):
        raise _error("expected a property name in double quotes", pos)
    key, pos = scanstring(text, pos + 1)
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if not text.startswith(":", pos):
        raise _error("expected ':'", pos)
    frame[1] = key
    return _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


def _scalar(text: str, pos: int) -> tuple[object, int]:
    for word, value in _LITERALS.items():
        if text.startswith(word, pos):
            return value, pos + len(word)
    for word, constant in _CONSTANTS.items():
        if text.startswith(word, pos):
            return constant, pos + len(word)
    match = _NUMBER.match(text, pos)
    if match is None or match.end() == pos:
        raise _error("expected a value", pos)
    literal = match.group()
    number = float(literal) if any(c in literal for c in ".eE") else int(literal)
    return number, match.end()
