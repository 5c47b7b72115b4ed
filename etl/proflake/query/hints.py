"""What a selection holds, in one line: the hint printed when a fetch matched nothing."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from proflake.query.profiles import Profiles


def what_exists(profiles: Profiles, *, profiler: str, **scope: Any) -> str:
    """``profiler``'s steps per mode, nodes and time span within ``scope`` (job, all_jobs, node):
    ``train steps 0-3, eval steps 0-1; nodes algo-1, algo-2; 2020-08-04T23:56:03Z to 23:56:16Z``."""
    intervals = profiles.list_profile_stats(profiler=profiler, **scope)
    if intervals.num_rows == 0:
        return f"there are no {profiler} intervals in this scope"
    steps: dict[str, set[int]] = defaultdict(set)
    for side in ("start", "end"):
        for mode, step in zip(intervals[f"{side}_mode"].to_pylist(), intervals[f"{side}_step"].to_pylist()):
            if step is not None and step >= 0:
                steps[mode].add(step)
            else:
                steps.setdefault(mode, set())
    modes = [f"{mode} steps {_ranges(sorted(found))}" if found else mode for mode, found in steps.items()]
    nodes = sorted(set(intervals["node_id"].to_pylist()))
    first = min(intervals["start_time_us"].to_pylist()) / 1e6
    last = max(intervals["end_time_us"].to_pylist()) / 1e6
    return (
        f"the {profiler} intervals here hold {', '.join(modes)}; node(s) {', '.join(nodes)}; "
        f"times {_iso(first)} to {_iso(last)}"
    )


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 3, 7]`` as ``0-3, 7``."""
    out: list[str] = []
    start = prev = values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds")
