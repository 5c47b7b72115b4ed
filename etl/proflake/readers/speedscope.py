"""speedscope files (https://www.speedscope.app/file-format-schema.json) -> a call tree.

A file holds ``shared.frames`` (name, file, line) and ``profiles``, each ``sampled`` (``samples``:
stacks of frame indices, outermost first, with ``weights``) or ``evented`` (``events``: open ``O`` and
close ``C`` of a frame ``at`` a value). Every profile (py-spy writes one per thread) adds to one tree:
a sampled stack adds its weight; between two events the open frames add the value that passed.

Unit: the profile's ``unit``: seconds, milliseconds, microseconds or nanoseconds become seconds;
``none`` stays samples (seconds with ``--sample-rate``); ``bytes`` is refused. The interval's
duration is ``endValue - startValue`` of the longest-spanning profile, in seconds when the unit is a time.
"""

from __future__ import annotations

import math

from proflake.errors import ParseError
from proflake.formats import Format
from proflake.readers.jsontree import json_document
from proflake.readers.parse import SAMPLES, SECONDS, ParsedStats, tree_stats
from proflake.readers.stacktree import Frame, StackTreeBuilder

_SECONDS_PER = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9}


def _bad(message: str) -> ParseError:
    return ParseError("speedscope", f"not a speedscope file: {message}")


def _number(value: object, what: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise _bad(f"{what} is {value!r}, expected a number")
    return float(value)  # type: ignore[arg-type]


def _frames(doc: dict) -> list[Frame]:
    shared = doc.get("shared")
    frames = shared.get("frames") if type(shared) is dict else None
    if type(frames) is not list:
        raise _bad("it has no shared.frames list")
    out: list[Frame] = []
    for i, frame in enumerate(frames):
        if type(frame) is not dict or type(frame.get("name")) is not str:
            raise _bad(f"frame {i} has no name")
        file, line = frame.get("file") or "", frame.get("line") or 0
        if type(file) is not str or type(line) is not int or line < 0:
            raise _bad(f"frame {i} has a bad file or line")
        out.append((frame["name"], file, line))
    return out


def _stack(indices: object, frames: list[Frame], what: str) -> list[Frame]:
    if type(indices) is not list or any(type(i) is not int or not 0 <= i < len(frames) for i in indices):
        raise _bad(f"{what} is not a list of frame indices")
    return [frames[i] for i in indices]


def _sampled(profile: dict, frames: list[Frame], tree: StackTreeBuilder, n: int) -> int:
    samples, weights = profile.get("samples"), profile.get("weights")
    if type(samples) is not list or type(weights) is not list or len(samples) != len(weights):
        raise _bad(f"profile {n} has no samples and weights of one length")
    for i, (stack, weight) in enumerate(zip(samples, weights)):
        value = _number(weight, f"profile {n}'s weight {i}")
        if value < 0:
            raise _bad(f"profile {n}'s weight {i} is negative")
        tree.add(_stack(stack, frames, f"profile {n}'s sample {i}"), value)
    return len(samples)


def _evented(profile: dict, frames: list[Frame], tree: StackTreeBuilder, n: int) -> int:
    events = profile.get("events")
    if type(events) is not list:
        raise _bad(f"profile {n} has no events list")
    open_frames: list[int] = []
    last = _number(profile.get("startValue", 0), f"profile {n}'s startValue")
    for i, event in enumerate(events):
        if type(event) is not dict or event.get("type") not in ("O", "C"):
            raise _bad(f"profile {n}'s event {i} is not an open (O) or close (C) event")
        at = _number(event.get("at"), f"profile {n}'s event {i} 'at'")
        if at < last:
            raise _bad(f"profile {n}'s event {i} goes back in time")
        if open_frames:
            tree.add([frames[f] for f in open_frames], at - last, samples=0)
        last = at
        frame = event.get("frame")
        if type(frame) is not int or not 0 <= frame < len(frames):
            raise _bad(f"profile {n}'s event {i} names no frame")
        if event["type"] == "O":
            open_frames.append(frame)
        elif not open_frames or open_frames[-1] != frame:
            raise _bad(f"profile {n}'s event {i} closes a frame that is not the innermost open one")
        else:
            open_frames.pop()
    if open_frames:
        raise _bad(f"profile {n} ends with {len(open_frames)} frame(s) still open")
    return len(events) // 2


def read_speedscope(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    doc = json_document(data, _bad)
    if type(doc) is not dict or type(doc.get("profiles")) is not list:
        raise _bad("it has no profiles list")
    frames = _frames(doc)
    tree = StackTreeBuilder()
    units, spans, samples = set(), [], 0
    for n, profile in enumerate(doc["profiles"]):
        if type(profile) is not dict:
            raise _bad(f"profile {n} is not an object")
        units.add(profile.get("unit", "none"))
        start = _number(profile.get("startValue", 0), f"profile {n}'s startValue")
        spans.append((start, _number(profile.get("endValue", start), f"profile {n}'s endValue")))
        kind = profile.get("type")
        if kind == "sampled":
            samples += _sampled(profile, frames, tree, n)
        elif kind == "evented":
            samples += _evented(profile, frames, tree, n)
        else:
            raise _bad(f"profile {n} is of type {kind!r}, expected 'sampled' or 'evented'")
    if len(units) > 1:
        raise _bad(f"its profiles mix units ({', '.join(sorted(map(str, units)))})")
    unit = units.pop() if units else "none"
    tree.samples = samples
    span = max((end - start for start, end in spans), default=None)
    target = doc.get("name") if type(doc.get("name")) is str else None
    if unit in _SECONDS_PER:
        scale = _SECONDS_PER[unit]
        return tree_stats(tree.build(scale), fmt, SECONDS, rate, duration=span * scale if span is not None else None, target=target)
    if unit != "none":
        raise _bad(f"its unit is {unit!r}; proflake reads time (seconds, milliseconds, microseconds, nanoseconds) or none (samples)")
    if rate:
        return tree_stats(tree.build(1.0 / rate), fmt, SECONDS, rate, duration=span / rate if span is not None else None, target=target)
    return tree_stats(tree.build(), fmt, SAMPLES, None, target=target)
