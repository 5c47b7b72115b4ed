"""Collapsed stacks -> a call tree: flamegraph.pl's folded lines, py-spy ``--format raw`` and austin.

A line is ``frame;frame;...;frame WEIGHT``, outermost frame first. The weight is a sample count for
flamegraph.pl and py-spy (seconds only with a sample rate: py-spy's default is 100 Hz, ``--sample-rate``
otherwise), and microseconds of time for austin in its default, wall and cpu modes (its README: "Each
line then ends with a single [metric], i.e. the sampling time measured in microseconds"; ``-f`` full
mode ends lines with ``time,idle,memory``: the time is read; ``-m`` memory mode is refused: bytes are
no time).

Frames: py-spy writes ``name (file:line)``; austin ``file:function:line`` after its ``P<pid>;T<tid>``
(merged across threads, as py-spy merges them by default), or with ``-a`` ``file:function;L<line>``;
any other frame is a bare name (file '', line 0). py-spy and austin name the line being executed, not
the function's first line: one function sampled on two lines is two frames, as their flame graphs draw it.
"""

from __future__ import annotations

import math
import re

from proflake.errors import ParseError
from proflake.formats import Format
from proflake.readers.parse import SAMPLES, SECONDS, ParsedStats, tree_stats
from proflake.readers.stacktree import Frame, StackTreeBuilder

_PYSPY_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
_AUSTIN_FRAME = re.compile(r"^(?P<file>.*):(?P<name>[^:]*):(?P<line>\d+)$")
_AUSTIN_ALT_FRAME = re.compile(r"^(?P<file>.*):(?P<name>[^:]*)$")
_AUSTIN_PROCESS = re.compile(r"^P\d+$")
_AUSTIN_THREAD = re.compile(r"^T[^;]*$")
_AUSTIN_LINE = re.compile(r"^L(\d+)$")
_HEADER = re.compile(r"^#\s*(?P<key>[a-z_ ]+):\s*(?P<value>.*?)\s*$")


def _bad(fmt: Format, message: str) -> ParseError:
    return ParseError(fmt.name, f"not {fmt.name} collapsed stacks: {message}")


def _preview(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _lines(data: bytes, fmt: Format) -> tuple[list[tuple[int, str]], dict[str, str]]:
    if not data.strip():
        raise _bad(fmt, "the file is empty")
    # Bytes that are not UTF-8 read as U+FFFD and the rest of the file is kept: austin reads each frame's
    # name from its child's memory and can catch one the child is still writing at start-up (one frame name
    # in a 569-line recording of tests/helpers/recorded.py's workload, 2026-12-06, b"p\r\xb9k\x8e\x7f"),
    # a name flamegraph.pl and speedscope show garbled too. A file that is not collapsed stacks at all
    # still fails on its lines.
    text = data.decode("utf-8", errors="replace")
    lines, header = [], {}
    # Lines end at "\n" (and "\r\n"), nothing else: the name austin caught mid-write held a "\r", which
    # str.splitlines() took for the end of its line, as it would "\x0c", "\x1c" or "\x85" in any name.
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip()
        if not line.strip():
            continue
        if line.startswith("#"):
            match = _HEADER.match(line)
            if match:
                header[match["key"].strip()] = match["value"]
            continue
        lines.append((number, line))
    return lines, header


def _weight(text: str, number: int, line: str, fmt: Format) -> float:
    first = text.split(",", 1)[0]  # austin -f: time,idle,memory
    try:
        value = float(first)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise _bad(fmt, f"line {number} does not end in a non-negative count: {_preview(line)}")
    return value


def _frame(text: str) -> Frame:
    match = _PYSPY_FRAME.match(text)
    if match:
        return (match["name"], match["file"], int(match["line"] or 0))
    return (text, "", 0)


def _austin_frames(parts: list[str]) -> list[Frame]:
    frames: list[Frame] = []
    for part in parts:
        if not frames and (_AUSTIN_PROCESS.match(part) or _AUSTIN_THREAD.match(part)):
            continue
        line = _AUSTIN_LINE.match(part)
        if line and frames:
            name, file, _ = frames[-1]
            frames[-1] = (name, file, int(line.group(1)))
            continue
        match = _AUSTIN_FRAME.match(part) or _AUSTIN_ALT_FRAME.match(part)
        if match:
            frames.append((match["name"], match["file"], int(match.groupdict().get("line") or 0)))
        else:
            frames.append((part, "", 0))
    return frames


def _stacks(data: bytes, fmt: Format, austin: bool = False) -> tuple[StackTreeBuilder, dict[str, str]]:
    lines, header = _lines(data, fmt)
    if not lines:
        raise _bad(fmt, "it holds no stack line")
    tree = StackTreeBuilder()
    for number, line in lines:
        stack, space, count = line.rpartition(" ")
        if not space and not count.replace(".", "", 1).isdigit():
            raise _bad(fmt, f"line {number} is not 'frame;frame;... COUNT': {_preview(line)}")
        weight = _weight(count, number, line, fmt)
        parts = stack.split(";")
        frames = _austin_frames(parts) if austin else [_frame(p) for p in parts if p]
        tree.add(frames, weight, 1 if austin else max(int(weight), 1) if weight == int(weight) else 1)
    return tree, header


def read_collapsed(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    """flamegraph.pl's collapsed stacks (and py-spy raw): counts of samples, seconds at a known rate."""
    rate = rate or fmt.default_rate_hz
    tree, _ = _stacks(data, fmt)
    if rate is None:
        return tree_stats(tree.build(), fmt, SAMPLES, None)
    return tree_stats(tree.build(1.0 / rate), fmt, SECONDS, rate)


read_pyspy_raw = read_collapsed


def read_austin(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    """austin's output: microseconds of time per sample (its header's interval gives the rate)."""
    tree, header = _stacks(data, fmt, austin=True)
    mode = header.get("mode", "wall")
    if mode == "memory":
        raise _bad(fmt, "it was recorded in austin's memory mode (-m), whose numbers are bytes, not time")
    interval_us = _number(header.get("interval"))
    duration_us = _number(header.get("duration"))
    return tree_stats(
        tree.build(1e-6), fmt, SECONDS, 1e6 / interval_us if interval_us else None,
        duration=duration_us / 1e6 if duration_us is not None else None, target=header.get("austin") and f"austin {header['austin']} ({mode})",
    )


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None
