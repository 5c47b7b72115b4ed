"""The command line's words for a diff: each side's selection, and the --fail-on thresholds.

A side is one kind of selection, as one fetch method selects it: a range of steps of one mode (by_step,
with its start and end phases), a time window (by_time), the intervals between two modes
(between_modes), or a job phase (initialization: pre_step_zero; finalization: post_hook_close).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from proflake.errors import UnknownNameError, UsageError
from proflake.query.diff import Selection
from proflake.query.names import DIFF_SIDE_OPTIONS as SIDE_OPTIONS

JOB_PHASE_METHODS = {"initialization": "pre_step_zero", "finalization": "post_hook_close"}
# Which kind of selection each option asks for; the step options all say "steps".
_KIND = {"steps": "steps", "mode": "steps", "start_phase": "steps", "end_phase": "steps",
         "time": "time", "modes": "modes", "job_phase": "job_phase"}
_SPELLING = {"steps": "--steps/--mode/--start-phase/--end-phase", "time": "--time", "modes": "--modes",
             "job_phase": "--job-phase"}


def side_selection(job: str | None, own: Mapping[str, Any], shared: Mapping[str, Any]) -> Selection:
    """One side from the command line: its own options (``--base-X``) win over the shared ones (``--X``),
    and a side whose own options choose a kind of selection (steps, time window, modes, job phase) ignores
    the shared options of the other kinds, so ``--steps 0:99 --head-time A:B`` compares steps with a window."""
    own_kinds = {_KIND[k] for k, v in own.items() if v is not None and k in _KIND}
    values: dict[str, Any] = {}
    for name, _, _ in SIDE_OPTIONS:
        value = own.get(name)
        if value is None and (not own_kinds or _KIND.get(name) in (None, *own_kinds)):
            value = shared.get(name)
        values[name] = value
    return selection(job, **values)


def selection(
    job: str | None,
    node: str | None = None,
    steps: str | None = None,
    mode: str | None = None,
    time: str | None = None,
    *,
    start_phase: str | None = None,
    end_phase: str | None = None,
    modes: str | None = None,
    job_phase: str | None = None,
) -> Selection:
    """A side from its options: ``steps`` ``A:B``, ``A`` or ``A:*`` of ``mode`` (default train) between
    ``start_phase`` and ``end_phase``; or ``time`` ``START:END``; or ``modes`` ``START:END``; or
    ``job_phase``; none of them: every step of ``mode``. Two kinds at once are a UsageError."""
    given = {"steps": steps, "mode": mode, "start_phase": start_phase, "end_phase": end_phase,
             "time": time, "modes": modes, "job_phase": job_phase}
    kinds = sorted({_KIND[k] for k, v in given.items() if v is not None})
    if len(kinds) > 1:
        raise UsageError(
            "a side is one of: a range of steps, a time window, a pair of modes or a job phase; this one has "
            + " and ".join(_SPELLING[k] for k in kinds)
        )
    if time is not None:
        start, end = _pair(time, "time window", "START:END")
        return Selection(
            job, node, "by_time", {"start_time_s": _number(start, "time"), "end_time_s": _number(end, "time")}
        )
    if modes is not None:
        start, end = _pair(modes, "--modes", "START_MODE:END_MODE (e.g. train:eval)")
        return Selection(job, node, "between_modes", {"start_mode": start, "end_mode": end})
    if job_phase is not None:
        method = JOB_PHASE_METHODS.get(job_phase.strip().lower().replace("-", "_"))
        if method is None:
            raise UnknownNameError("job phase", job_phase, JOB_PHASE_METHODS)
        return Selection(job, node, method, {})
    arguments: dict[str, Any] = {"mode": mode or "train"}
    if steps is not None:
        first, sep, last = steps.partition(":")
        arguments["start_step"] = first.strip() or "*"
        arguments["end_step"] = (last.strip() or "*") if sep else first.strip()
    if start_phase is not None:
        arguments["start_phase"] = start_phase
    if end_phase is not None:
        arguments["end_phase"] = end_phase
    return Selection(job, node, "by_step", arguments)


def _pair(text: str, what: str, shape: str) -> tuple[str, str]:
    first, sep, second = text.partition(":")
    if not sep or not first.strip() or not second.strip():
        raise UsageError(f"{what} {text!r} is not of the form {shape}")
    return first.strip(), second.strip()


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a number of seconds since the epoch") from None


def parse_fail_on(values: list[str] | tuple[str, ...]) -> tuple[float | None, float | None]:
    """``--fail-on`` values -> (total, function) thresholds as fractions: ``10%`` sets both,
    ``total:10%`` or ``function:25%`` one of them."""
    total: float | None = None
    function: float | None = None
    for value in values:
        target, sep, amount = value.rpartition(":")
        target = target.strip().lower() if sep else "both"
        if target not in ("both", "total", "function"):
            raise UsageError(
                f"--fail-on {value!r}: expected PERCENT, total:PERCENT or function:PERCENT (e.g. 10%)"
            )
        text = amount.strip().removesuffix("%").strip()
        try:
            fraction = float(text) / 100
        except ValueError:
            raise UsageError(f"--fail-on {value!r} is not a percentage; write e.g. 10% or total:5%") from None
        if not math.isfinite(fraction) or fraction < 0:
            raise UsageError(f"--fail-on {value!r} must be a percentage of zero or more")
        if target in ("both", "total"):
            total = fraction
        if target in ("both", "function"):
            function = fraction
    return total, function
