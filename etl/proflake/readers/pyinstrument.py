"""pyinstrument sessions (``python_stats.json``, JSONRenderer output of 3.x, 4.x, 5.x) -> pyinstrument_frames columns.

The renderer writes an inclusive-time call tree; the time a frame spent in itself is written as
``[self]`` children. Those pseudo-frames are folded into their parent's ``self_time`` instead of
becoming rows. The tree is walked with an explicit stack, never recursion, because real traces can be
deeper than Python's recursion limit. Reading needs no pyinstrument installed.

Field differences by version, all read with defaults: 3.x has ``program``, 4.x/5.x
``target_description`` and ``await_time``; 3.x fills ``file_path`` for ``[self]``, 4.x/5.x leave it
empty. smdebug writes ``{"root_frame": null}`` when pyinstrument failed: an empty session, not an error.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import pyarrow as pa

from proflake.errors import ParseError
from proflake.readers.jsontree import loads_deep

SELF_MARKER = "[self]"
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class PyinstrumentData:
    frames: pa.Table  # pyinstrument_frames' own columns
    start_time: float | None
    duration: float | None
    sample_count: int | None
    cpu_time: float | None
    target: str | None
    profiled_seconds: float
    is_empty: bool


def _bad(message: str) -> ParseError:
    return ParseError("pyinstrument", f"not a pyinstrument JSON session: {message}")


def _number(frame: dict, field: str, default: float | None = None) -> float:
    value = frame.get(field, default)
    if not isinstance(value, (int, float)) or type(value) is bool or not math.isfinite(value) or value < 0:
        raise _bad(f"frame field {field!r} is {value!r}, expected a finite non-negative number")
    return float(value)


def _text(frame: dict, field: str, default: str | None = "") -> str | None:
    value = frame.get(field, default)
    if value is not None and type(value) is not str:
        raise _bad(f"frame field {field!r} is {type(value).__name__}, expected a string")
    return value


def _optional_number(doc: dict, field: str) -> float | None:
    value = doc.get(field)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _bad(f"session field {field!r} is {value!r}, expected a number")
    return float(value)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def path_hash(parent: int | None, function_key: str) -> int:
    """A call path's id: stable across intervals and runs, so trees merge with GROUP BY."""
    digest = hashlib.blake2b(f"{parent}\x00{function_key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def read_pyinstrument(data: bytes) -> PyinstrumentData:
    if not data:
        raise _bad("the file is empty")
    try:
        doc = loads_deep(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise _bad(f"malformed JSON ({e})") from e
    if type(doc) is not dict:
        raise _bad(f"top level is {type(doc).__name__}, expected an object")
    if "root_frame" not in doc:
        raise _bad("it has no root_frame")
    target = doc.get("target_description", doc.get("program"))
    if target is not None and (type(target) is not str or not _is_text(target)):
        raise _bad("target_description/program is not a valid string")
    sample_count = doc.get("sample_count")
    if sample_count is not None and (type(sample_count) is not int or not 0 <= sample_count <= _INT64_MAX):
        raise _bad(f"sample_count is {sample_count!r}, expected a non-negative integer")
    columns = _flatten(doc["root_frame"])
    try:
        frames = pa.table(columns, schema=FRAME_SCHEMA)
    except UnicodeEncodeError as e:  # JSON escapes can spell lone surrogates, which are not text
        raise _bad("a function or file name is not valid Unicode") from e
    return PyinstrumentData(
        frames=frames,
        start_time=_optional_number(doc, "start_time"),
        duration=_optional_number(doc, "duration"),
        sample_count=sample_count,
        cpu_time=_optional_number(doc, "cpu_time"),
        target=target,
        profiled_seconds=columns["time"][0] if columns["time"] else 0.0,
        is_empty=not columns["time"],
    )


FRAME_SCHEMA = pa.schema(
    [
        ("frame_id", pa.int64()),
        ("parent_id", pa.int64()),
        ("depth", pa.int64()),
        ("function", pa.string()),
        ("function_name", pa.string()),
        ("filename", pa.string()),
        ("file_path_short", pa.string()),
        ("lineno", pa.int64()),
        ("class_name", pa.string()),
        ("time", pa.float64()),
        ("self_time", pa.float64()),
        ("await_time", pa.float64()),
        ("is_application_code", pa.bool_()),
        ("is_outermost", pa.bool_()),
        ("path_id", pa.int64()),
        ("parent_path_id", pa.int64()),
    ]
)

_EXIT = object()


def _flatten(root: object) -> dict[str, list]:
    cols: dict[str, list] = {field.name: [] for field in FRAME_SCHEMA}
    if root is None:
        return cols
    # Each stack entry is a frame to emit, or an _EXIT marker that takes its key off the current path.
    stack: list[tuple] = [(root, None, 0, None)]
    on_path: dict[str, int] = {}
    while stack:
        frame, parent_id, depth, parent_path = stack.pop()
        if frame is _EXIT:
            on_path[parent_id] -= 1
            continue
        if type(frame) is not dict:
            raise _bad(f"a frame is {type(frame).__name__}, expected an object")
        function_name = _text(frame, "function", None)
        if function_name is None:
            raise _bad("a frame has no function name")
        filename = _text(frame, "file_path") or ""
        line = frame.get("line_no", 0)
        if line is None:
            line = 0
        if type(line) is not int or not 0 <= line <= _INT64_MAX:
            raise _bad(f"frame field 'line_no' is {line!r}, expected a line number")
        time = _number(frame, "time")
        children = frame.get("children", [])
        if children is None:
            children = []
        if type(children) is not list:
            raise _bad("a frame's children are not a list")
        real_children = []
        children_time = 0.0
        for child in children:
            if type(child) is dict and child.get("function") == SELF_MARKER:
                _number(child, "time")
                continue
            real_children.append(child)
            if type(child) is dict:
                children_time += _number(child, "time")
        is_app = frame.get("is_application_code", False)
        if type(is_app) is not bool:
            raise _bad("frame field 'is_application_code' is not a boolean")

        key = f"{filename}:{line}({function_name})"
        frame_id = len(cols["frame_id"])
        path_id = path_hash(parent_path, key)
        seen = on_path.get(key, 0)
        cols["frame_id"].append(frame_id)
        cols["parent_id"].append(parent_id)
        cols["depth"].append(depth)
        cols["function"].append(key)
        cols["function_name"].append(function_name)
        cols["filename"].append(filename)
        cols["file_path_short"].append(_text(frame, "file_path_short", None))
        cols["lineno"].append(line)
        cols["class_name"].append(_text(frame, "class_name", None) or None)
        cols["time"].append(time)
        # Rounding in the renderer can make children sum to a hair more than their parent.
        cols["self_time"].append(max(time - children_time, 0.0))
        cols["await_time"].append(_number(frame, "await_time", 0.0))
        cols["is_application_code"].append(is_app)
        cols["is_outermost"].append(seen == 0)
        cols["path_id"].append(path_id)
        cols["parent_path_id"].append(parent_path)
        on_path[key] = seen + 1
        stack.append((_EXIT, key, 0, None))
        for child in reversed(real_children):
            stack.append((child, frame_id, depth + 1, path_id))
    return cols


def dumps_tree(rows: list[dict]) -> dict | None:
    """Rebuild a pyinstrument-style root_frame from pyinstrument_frames rows of one interval.

    ``[self]`` children are synthesised from self_time where a frame has both children and self time,
    the way pyinstrument's renderer writes them.
    """
    if not rows:
        return None
    nodes: dict[int, dict] = {}
    root = None
    for row in sorted(rows, key=lambda r: r["frame_id"]):
        node = {
            "function": row["function_name"],
            "file_path_short": row.get("file_path_short") or "",
            "file_path": row["filename"],
            "line_no": row["lineno"],
            "time": row["time"],
            "await_time": row["await_time"],
            "is_application_code": row["is_application_code"],
            "children": [],
        }
        if row.get("class_name"):
            node["class_name"] = row["class_name"]
        node["_self"] = row["self_time"]
        nodes[row["frame_id"]] = node
        if row["parent_id"] is None:
            root = node
        else:
            nodes[row["parent_id"]]["children"].append(node)
    for node in nodes.values():
        self_time = node.pop("_self")
        if node["children"] and self_time > 0:
            node["children"].append(
                {
                    "function": SELF_MARKER,
                    "file_path_short": "",
                    "file_path": "",
                    "line_no": 0,
                    "time": self_time,
                    "await_time": 0.0,
                    "is_application_code": False,
                    "children": [],
                }
            )
    return root


def dumps_session(interval: dict, rows: list[dict]) -> str:
    """A JSON document shaped like pyinstrument's JSONRenderer output, rebuilt from the store."""
    return json.dumps(
        {
            "start_time": interval.get("session_start_time"),
            "duration": interval.get("session_duration_s"),
            "sample_count": interval.get("session_sample_count"),
            "target_description": interval.get("session_target"),
            "cpu_time": interval.get("session_cpu_time_s"),
            "root_frame": dumps_tree(rows),
        }
    )
