"""Saved pyinstrument sessions (``Session.save``, ``pyinstrument -o x.pyisession``) -> a call tree.

A session is JSON: ``start_time``, ``duration``, ``sample_count``, ``cpu_time``, ``target_description``
and ``frame_records``, each ``[stack, seconds]`` with the stack outermost first, a frame written
``function\\x00file\\x00line`` and attributes after ``\\x01`` (``\\x01l12``: the line executing). The
tree is pyinstrument's own (every record adds its time along its stack), so its root time is the sum
of the records, as in pyinstrument's JSON renderer. A leading ``<thread>`` frame is dropped when every
record has the same one (pyinstrument's renderer does not show it either).
"""

from __future__ import annotations

import math

from proflake.errors import ParseError
from proflake.formats import Format
from proflake.readers.jsontree import json_document
from proflake.readers.parse import SECONDS, ParsedStats, tree_stats
from proflake.readers.stacktree import Frame, StackTreeBuilder


def _bad(message: str) -> ParseError:
    return ParseError("pyinstrument-session", f"not a pyinstrument session: {message}")


def _frame(identifier: object) -> Frame:
    if type(identifier) is not str:
        raise _bad("a frame is not a string")
    name, _, rest = identifier.split("\x01", 1)[0].partition("\x00")
    file, _, line = rest.partition("\x00")
    return (name, file, int(line) if line.isdigit() else 0)


def _optional(doc: dict, field: str) -> float | None:
    value = doc.get(field)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _bad(f"{field} is {value!r}, expected a non-negative number")
    return float(value)


def read_pyisession(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    doc = json_document(data, _bad)
    if type(doc) is not dict or type(doc.get("frame_records")) is not list:
        raise _bad("it has no frame_records list")
    records = []
    for i, record in enumerate(doc["frame_records"]):
        if type(record) is not list or len(record) != 2 or type(record[0]) is not list:
            raise _bad(f"frame record {i} is not [stack, time]")
        seconds = record[1]
        if type(seconds) not in (int, float) or not math.isfinite(seconds) or seconds < 0:
            raise _bad(f"frame record {i}'s time is {seconds!r}")
        records.append(([_frame(f) for f in record[0]], float(seconds)))
    threads = {stack[0] for stack, _ in records if stack and stack[0][1] == "<thread>"}
    drop = 1 if len(threads) == 1 and all(stack and stack[0] in threads for stack, _ in records) else 0
    tree = StackTreeBuilder()
    for stack, seconds in records:
        tree.add(stack[drop:], seconds)
    target = doc.get("target_description")
    return tree_stats(
        tree.build(), fmt, SECONDS, None, duration=_optional(doc, "duration"), start_time=_optional(doc, "start_time"),
        target=target if type(target) is str else None, cpu_time=_optional(doc, "cpu_time"),
    )
