"""A fetch's arguments as its SQL parameters: profiler names, steps, a method's own arguments (the
registry says which it takes), and the selection a roll-up runs over."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from proflake import arrowfn
from proflake.errors import UnknownNameError, UsageError
from proflake.modes import mode_label, phase_label
from proflake.query.names import PROFILERS
from proflake.query.registry import FetchMethod
from proflake.store.snapshot import FileSpans
from proflake.times import epoch_seconds

Step = int | str  # an int, or "*" (before step 0 at the start, until the end at the end)


def profiler_name(profiler: str | None) -> str | None:
    if profiler is None:
        return None
    name = profiler.strip().lower()
    if name not in PROFILERS:
        raise UnknownNameError("profiler", profiler, PROFILERS)
    return name


# Steps are compared as the 64-bit integers the store holds (a DOUBLE cannot tell 2**63-1 from 2**63-2);
# '*' at the end ("until the end") is the largest one, as NULL end steps are in the step_end macro.
STEP_MAX = 2**63 - 1


def parse_step(value: Step | float, *, at_end: bool) -> int:
    """A step as the SQL compares it: '*' is -1 at the start and the largest step at the end, like smdebug."""
    if isinstance(value, str):
        text = value.strip()
        if text == "*":
            return STEP_MAX if at_end else -1
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"step {value!r} is not a whole number or '*'") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"step {value!r} is not a whole number or '*'")
    if isinstance(value, float):
        if value == math.inf and at_end:
            return STEP_MAX
        if not value.is_integer():
            raise UsageError(f"step {value!r} is not a whole number or '*'")
        value = int(value)
    if not -(2**63) <= value <= STEP_MAX:
        raise UsageError(f"step {value} is outside the 64-bit range a step can hold")
    return value


def method_params(spec: FetchMethod, a: dict[str, Any]) -> dict[str, Any]:
    """The SQL parameters of a method's own arguments (the registry says which it takes)."""
    method = spec.name
    unexpected = set(a) - set(spec.argument_names)
    if unexpected:
        raise UsageError(f"fetch {method} takes no argument {', '.join(sorted(unexpected))}")
    if method == "by_time":
        start, end = epoch_seconds(a["start_time_s"]), epoch_seconds(a["end_time_s"])
        if end < start:
            raise UsageError(
                f"the time window ends ({a['end_time_s']}) before it starts ({a['start_time_s']}); "
                "give its start first, then its end"
            )
        return {"start_time_us": start * 1e6, "end_time_us": end * 1e6}
    if method == "by_step":
        start_step = parse_step(a["start_step"], at_end=False)
        end_raw = a.get("end_step")
        end_step = start_step if end_raw is None else parse_step(end_raw, at_end=True)
        if end_step < start_step:
            raise UsageError(
                f"the step range ends ({end_raw}) before it starts ({a['start_step']}); "
                "give its first step first, then its last"
            )
        return {
            "start_step": start_step,
            "end_step": end_step,
            "mode": mode_label(a.get("mode", "train")),
            "start_phase": phase_label(a.get("start_phase", "stepstart")),
            "end_phase": phase_label(a.get("end_phase", "stepend")),
        }
    if method == "between_modes":
        return {"start_mode": mode_label(a["start_mode"]), "end_mode": mode_label(a["end_mode"])}
    return {}


def rollup_parameters(selection: pa.Table, params: dict[str, Any], files: Mapping[str, FileSpans]) -> dict[str, Any]:
    """The parameters of a roll-up over a fetch's selected intervals: ``params`` plus their ids (the list
    parameter ``$interval_ids``), their time span, and each fact table's files that can hold them.

    ``files`` (from ``Store.connect_with_files``) narrows each fact table to the files whose rows can start
    inside the selection's time span and belong to one of its nodes (why ids as a list parameter:
    docs/internals.md, "Roll-ups take the selection's ids").
    """
    starts = selection["start_time_us"]
    low, high = arrowfn.min_max(starts) if len(starts) else (0.0, -1.0)
    nodes = arrowfn.unique(selection["node_id"])
    span: dict[str, Any] = {
        "interval_ids": selection["interval_id"].to_pylist(),
        "min_start_time_us": low,
        "max_start_time_us": high,
    }
    for table, spans in files.items():
        # read_parquet needs at least one file; with none overlapping, any one answers nothing.
        span[f"{table}_files"] = spans.overlapping(low, high, nodes) or spans.uris[:1]
    return {**params, **span}
