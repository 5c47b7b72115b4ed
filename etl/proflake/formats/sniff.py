"""What a profile file says about itself before it is parsed: its format, by content where the name
does not say it, and the times and unit its interval gets (docs/formats.md). Pure Python, no pyarrow:
the plain-files source plans with it in the ingesting process.

Detection reads the file's first 64 KB: a JSON object with ``"$schema"`` naming speedscope or
``"shared"`` with ``"frames"`` is speedscope; with ``"frame_records"`` a pyinstrument session; with
``"root_frame"`` pyinstrument's JSON; a marshal dict (``{`` then a tuple key) a cProfile/pstats dump;
text lines ``a;b;c 123`` collapsed stacks: austin's when its header (``# austin:``) or ``P<pid>;T``
frames say so, py-spy's when the frames are ``name (file:line)``, flamegraph.pl's otherwise.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since Python 2.6, untyped
from pathlib import Path

from proflake.formats import FORMATS, Format, by_suffix

HEAD_BYTES = 64 * 1024
_JSON_START = re.compile(rb'^\s*\{\s*("|\})')
_COLLAPSED_LINE = re.compile(r"^(?:.*\S )?\s*\d+(?:\.\d+)?(?:,-?\d+(?:\.\d+)?)*$")
_PYSPY_FRAME = re.compile(r"\S \([^()]*:\d+\)(?:;|\s\d)")
_AUSTIN_LINE = re.compile(r"^P\d+;T[^;\s]*[; ]")
_MARSHAL_TUPLE = frozenset(b"()\xa8\xa9")


def detect(head: bytes) -> Format | None:
    """The format of a file whose first bytes are ``head``, or None when it is none proflake reads."""
    if _JSON_START.match(head):
        if b'"frame_records"' in head:
            return FORMATS["pyinstrument-session"]
        if b"speedscope" in head[:512] or (b'"shared"' in head and b'"frames"' in head and b'"profiles"' in head):
            return FORMATS["speedscope"]
        if b'"root_frame"' in head:
            return FORMATS["pyinstrument"]
        return None
    if len(head) >= 2 and head[0] in (0x7B, 0xFB) and head[1] in _MARSHAL_TUPLE:
        return FORMATS["cprofile"]
    if len(head) >= 2 and head[:2] == b"{0":  # marshal of an empty dict
        return FORMATS["cprofile"]
    return _detect_text(head)


def _detect_text(head: bytes) -> Format | None:
    text = head.decode("utf-8", errors="replace")
    lines = text.split("\n")  # as the collapsed reader splits them (a name may hold a "\r")
    lines = lines[:-1] if len(head) >= HEAD_BYTES else lines
    if any(line.startswith("# austin:") for line in lines[:5]):
        return FORMATS["austin"]
    stack_lines = [line.rstrip() for line in lines if line.strip() and not line.startswith("#")]
    if not stack_lines or not all(_COLLAPSED_LINE.match(line) for line in stack_lines[:200]):
        return None
    if not any(";" in line or " " in line.strip() for line in stack_lines[:200]):
        return None  # bare numbers are no stacks
    if all(_AUSTIN_LINE.match(line) for line in stack_lines[:200]):
        return FORMATS["austin"]
    if any(_PYSPY_FRAME.search(line) for line in stack_lines[:200]):
        return FORMATS["pyspy-raw"]
    return FORMATS["collapsed"]


def detect_file(path: Path) -> Format | None:
    """The format of the file at ``path`` by its contents, else by its name; None when neither says."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return by_suffix(path.name)
    return detect(head) or by_suffix(path.name)


@dataclass(frozen=True)
class Span:
    """What a file says of its interval's time: seconds since the epoch, or only a duration."""

    start: float | None  # seconds since the epoch, when the file carries it
    duration: float
    source: str  # what the CLI says the times came from


_TIME_UNITS = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9}


def file_span(path: Path, fmt: Format, sample_rate_hz: float | None = None) -> Span | None:
    """The interval times ``path`` carries: a pyinstrument session's start and duration, a speedscope
    file's longest profile span, austin's ``# duration``; None when it carries none (or they cannot
    be read: the reader then says what is wrong with the file)."""
    if fmt.name in ("pyinstrument", "pyinstrument-session"):
        session = session_times(path)
        return None if session is None else Span(session[0], session[1], "pyinstrument session")
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if fmt.name == "speedscope":
        return _speedscope_span(data, sample_rate_hz)
    if fmt.name == "austin":
        match = re.search(rb"^# duration: (\d+)\s*$", data[-4096:], re.MULTILINE)
        return Span(None, int(match.group(1)) / 1e6, "austin duration") if match else None
    return None


def _speedscope_span(data: bytes, sample_rate_hz: float | None) -> Span | None:
    try:
        doc = json.loads(data)
        spans = [(p.get("unit", "none"), float(p["endValue"]) - float(p["startValue"])) for p in doc["profiles"]]
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    seconds = [
        span * _TIME_UNITS[unit] if unit in _TIME_UNITS else span / sample_rate_hz if unit == "none" and sample_rate_hz else None
        for unit, span in spans
    ]
    if not seconds or any(s is None or not math.isfinite(s) or s < 0 for s in seconds):
        return None
    return Span(None, max(s for s in seconds if s is not None), "speedscope profile span")


# pyinstrument's JSONRenderer writes start_time and duration before root_frame: the first 64 KB hold them.
_HEAD_BYTES = 64 * 1024
_SESSION_FIELDS = ("start_time", "duration")


def session_times(path: Path) -> tuple[float, float] | None:
    """(start_time, duration) in seconds from a pyinstrument JSON, or None if it has no usable ones.

    Only the top-level fields are read, never the call tree: a recursion 5,000 frames deep is 10,000
    nesting levels, past what ``json.load`` can decode (RecursionError). The file's head is read first;
    the rest only when the fields come after root_frame (a file re-written with sorted keys). A file this
    cannot read gets no session times; the reader then ingests it or says what is wrong with it."""
    try:
        with open(path, "rb") as f:
            data = f.read(_HEAD_BYTES)
            fields = _top_level_fields(data, _SESSION_FIELDS)
            if fields is None and len(data) == _HEAD_BYTES:
                data += f.read()
                fields = _top_level_fields(data, _SESSION_FIELDS, whole=True)
    except OSError:
        return None
    if fields is None:
        return None
    start, duration = _seconds(fields["start_time"]), _seconds(fields["duration"])
    return None if start is None or duration is None else (start, duration)


def _seconds(value: object) -> float | None:
    """A finite, non-negative number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _top_level_fields(data: bytes, names: tuple[str, ...], *, whole: bool = False) -> dict[str, object] | None:
    """The scalar values of the top-level fields ``names`` of the JSON object in ``data`` (all of them,
    or None: not found, not JSON, or ``data`` ends first). Nested values are skipped with a bracket
    counter, not decoded: no recursion and no tree in memory, however deep the document. ``whole``: the
    file's full text, tried with the C decoder first (fast when it is not deep)."""
    try:
        text = data.decode("utf-8")
        if whole:
            try:
                doc = json.loads(text)
            except RecursionError:
                pass
            else:
                if type(doc) is not dict or not all(name in doc for name in names):
                    return None
                return {name: doc[name] for name in names}
        return _scan_top_level(text, names)
    except (ValueError, IndexError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


_WS = re.compile(r"[ \t\n\r]*")
_BRACKET_OR_QUOTE = re.compile(r'["{}\[\]]')
_SCALAR_END = re.compile(r"[,}\] \t\n\r]")


def _scan_top_level(text: str, names: tuple[str, ...]) -> dict[str, object] | None:
    found: dict[str, object] = {}
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    if not text.startswith("{", pos):
        return None
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    while pos < len(text) and text[pos] == '"':
        key, pos = scanstring(text, pos + 1)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        end = _skip_value(text, pos)
        if key in names and text[pos] not in '{["':
            found[key] = json.loads(text[pos:end])
            if len(found) == len(names):
                return found
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
        if not text.startswith(",", pos):
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    return None


def _skip_value(text: str, pos: int) -> int:
    """Where the JSON value starting at ``pos`` ends (it is not checked, only delimited)."""
    first = text[pos]
    if first == '"':
        return int(scanstring(text, pos + 1)[1])
    if first not in "{[":
        match = _SCALAR_END.search(text, pos)
        if match is None:
            raise ValueError("the text ends inside a value")
        return match.start()
    depth = 0
    while True:
        match = _BRACKET_OR_QUOTE.search(text, pos)
        if match is None:
            raise ValueError("the text ends inside a value")
        pos = match.end()
        mark = match.group()
        if mark == '"':
            pos = int(scanstring(text, pos)[1])
        elif mark in "{[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos
