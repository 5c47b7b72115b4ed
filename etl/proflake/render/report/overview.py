"""The overview section of a report: what the selection holds, and what the store does not have."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from proflake import sql as queries
from proflake.numbers import utc

if TYPE_CHECKING:
    from proflake.query.profiles import FetchResult

MAX_LISTED = 50  # gaps and quarantined files listed; the counts are always complete


def overview(result: FetchResult) -> dict[str, Any]:
    intervals = result.intervals
    rows = intervals.select(
        ["job_id", "framework", "node_id", "start_mode", "end_mode", "start_step", "end_step", "start_time_us", "end_time_us",
         "source_uri", "source_size", "is_empty"]
    ).to_pylist()
    jobs = sorted({(r["job_id"], r["framework"]) for r in rows})
    con = result._profiles.connection()
    scope = result.scope
    in_scope = queries.run_named(
        con, "scope", {"job_ids": scope.job_ids, "node_id": scope.node_id, "source_prefix": scope.source_prefix}
    ).to_pylist()
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
        "profiler": result.profiler,
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
        "quarantine": _quarantine(result, rows),
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


def _quarantine(result: FetchResult, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Quarantined files below the selected jobs' folders (the part of a source URI before /framework/)."""
    bases = sorted({uri.split("/framework/")[0] + "/framework/" for uri in (r["source_uri"] for r in rows) if "/framework/" in uri})
    if not bases:
        return {"files": 0, "listed": []}
    errors = result._profiles.errors().to_pylist()
    mine = [e for e in errors if any(e["source_uri"].startswith(b) for b in bases)]
    return {
        "files": len(mine),
        "listed": [
            {"source_uri": e["source_uri"], "error_kind": e["error_kind"], "message": e["message"]} for e in mine[:MAX_LISTED]
        ],
    }
