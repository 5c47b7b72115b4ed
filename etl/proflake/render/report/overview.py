"""The overview section of a report: what the selection holds, and what the store does not have (from
proflake.query.page_data.ReportInputs; nothing here runs SQL)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from proflake.numbers import utc

if TYPE_CHECKING:
    from proflake.query.page_data import ReportInputs

MAX_LISTED = 50  # gaps and quarantined files listed; the counts are always complete


def overview(inputs: ReportInputs) -> dict[str, Any]:
    """The selection's jobs, profilers, nodes, modes, intervals, time span, step gaps and quarantine."""
    intervals = inputs.intervals
    rows = intervals.select(
        ["job_id", "framework", "node_id", "start_mode", "end_mode", "start_step", "end_step", "start_time_us", "end_time_us",
         "source_uri", "source_size", "is_empty"]
    ).to_pylist()
    jobs = sorted({(r["job_id"], r["framework"]) for r in rows})
    in_scope = inputs.in_scope.to_pylist()
    start = min((r["start_time_us"] for r in rows), default=None)
    end = max((r["end_time_us"] for r in rows), default=None)
    steps: dict[tuple[str, str], set[int]] = defaultdict(set)
    modes: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        if r["start_mode"] == r["end_mode"] and r["start_step"] == r["end_step"] and r["start_step"] >= 0:
            steps[(r["node_id"], r["start_mode"])].add(r["start_step"])
            modes[r["start_mode"]].add(r["start_step"])
    return {
        "jobs": [{"job_id": j, "framework": f} for j, f in jobs],
        "profiler": inputs.profiler,
        "profilers": [{"profiler": r["profiler"], "intervals": r["intervals"]} for r in in_scope],
        "nodes": sorted({r["node_id"] for r in rows}),
        "modes": [
            {"mode": m, "steps": len(s), "first_step": min(s), "last_step": max(s)} for m, s in sorted(modes.items())
        ],
        "intervals": len(rows),
        "empty_intervals": sum(1 for r in rows if r["is_empty"]),
        "bytes": sum(r["source_size"] or 0 for r in rows),
        "start": _iso(start),
        "end": _iso(end),
        "span_seconds": (end - start) / 1e6 if start is not None and end is not None else 0.0,
        "gaps": _gaps(steps),
        "quarantine": _quarantine(inputs.quarantine),
    }


def _iso(us: float | None) -> str | None:
    if us is None:
        return None
    return utc(us / 1e6, timespec="milliseconds")


def _gaps(steps: dict[tuple[str, str], set[int]]) -> dict[str, Any]:
    """Steps missing inside each node's profiled range of each mode (profiled every Nth step: the gaps of
    a regular stride are the profiler's setting, not missing data, and are not listed)."""
    listed: list[dict[str, Any]] = []
    total = 0
    for (node, mode), have in sorted(steps.items()):
        ordered = sorted(have)
        strides = {b - a for a, b in itertools.pairwise(ordered)}
        if len(strides) <= 1:
            continue  # contiguous, or a regular stride
        stride = min(strides)
        missing = [s for s in range(ordered[0], ordered[-1] + 1, stride) if s not in have]
        total += len(missing)
        if missing and len(listed) < MAX_LISTED:
            listed.append({"node_id": node, "mode": mode, "missing_steps": _ranges(missing), "count": len(missing)})
    return {"missing_steps": total, "listed": listed}


def _ranges(values: list[int]) -> str:
    out: list[str] = []
    start = prev = values[0]
    for v in values[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def _quarantine(mine: list[dict[str, Any]]) -> dict[str, Any]:
    """Quarantined files below the selected jobs' folders (the query layer picked them): their count, and
    the first MAX_LISTED."""
    if not mine:
        return {"files": 0, "listed": []}
    return {
        "files": len(mine),
        "listed": [
            {"source_uri": e["source_uri"], "error_kind": e["error_kind"], "message": e["message"]} for e in mine[:MAX_LISTED]
        ],
    }
