"""The title of a selection, said by what it selected: ``run-7 · whole job``, ``run-7 · node algo-2 ·
steps 5..9 (train)``. The report, the diff page and the exports' names use it; a fetch method's grouping
(``by_job_phase``) is not a selection and is not named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proflake.numbers import utc
from proflake.query.params import STEP_MAX


def what(method: str, arguments: Mapping[str, Any]) -> str:
    """What a fetch method selects with these SQL parameters (``steps 5..9 (train)``, ``whole job``)."""
    a = arguments
    if method == "by_step":
        start, end = a.get("start_step"), a.get("end_step")
        start_text = "start" if start is None or start < 0 else str(start)
        end_text = "end" if end is None or end >= STEP_MAX else str(end)
        steps = f"step {start_text}" if start_text == end_text else f"steps {start_text}..{end_text}"
        phases = ""
        if a.get("start_phase", "stepstart") != "stepstart" or a.get("end_phase", "stepend") != "stepend":
            phases = f", {a.get('start_phase')} to {a.get('end_phase')}"
        return f"{steps} ({a.get('mode', 'train')}{phases})"
    if method == "by_time":
        start, end = a.get("start_time_us"), a.get("end_time_us")
        if start is None or end is None:
            return "a time window"
        return f"time {utc(start / 1e6)} .. {utc(end / 1e6)}"
    if method == "between_modes":
        return f"modes {a.get('start_mode')} → {a.get('end_mode')}"
    if method == "pre_step_zero":
        return "initialization (before step 0)"
    if method == "post_hook_close":
        return "finalization (after the hook closed)"
    return "whole job"  # by_job_phase, by_training_phase: every interval in scope, grouped


def title(jobs: Sequence[str], node: str | None, method: str, arguments: Mapping[str, Any]) -> str:
    """``run-7 · node algo-2 · steps 5..9 (train)``: the jobs, the node when one, what was selected."""
    parts = [", ".join(jobs) or "proflake"]
    if node:
        parts.append(f"node {node}")
    parts.append(what(method, arguments))
    return " · ".join(parts)

