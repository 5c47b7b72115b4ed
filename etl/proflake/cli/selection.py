"""The fetch methods' selections as subcommands of another command (report, export).

``proflake report by-step 5 9 --out r.html`` selects what ``proflake fetch by-step 5 9`` selects; ``job``
selects every interval in scope (the job, or one node of it with --node).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

Run = Callable[[str, dict[str, Any], dict[str, Any]], None]  # (method, options, method arguments)


def add_selection_commands(group: click.Group, options: Callable[[Callable], Callable], run: Run, what: str) -> None:
    """Add one subcommand per selection to ``group``; ``options`` decorates each, ``run`` does the work."""

    def command(name: str, method: str, help_text: str, params: list[click.Parameter], arguments: Callable[..., dict]) -> None:
        def callback(**kwargs: Any) -> None:
            names = {p.name for p in params}
            own = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            run(method, kwargs, arguments(**own))

        cmd = click.command(name, help=f"{what} {help_text}")(options(callback))
        cmd.params = list(params) + cmd.params
        group.add_command(cmd)

    def arg(name: str, **kw: Any) -> click.Argument:
        return click.Argument([name], **kw)

    command("job", "by_job_phase", "every interval in scope: the whole job (or one node with --node).", [], dict)
    command(
        "by-time", "by_time", "the intervals overlapping [START, END] (seconds since the epoch).",
        [arg("start", type=float), arg("end", type=float)],
        lambda start, end: {"start_time_s": start, "end_time_s": end},
    )
    command(
        "by-step", "by_step", "the intervals in steps START_STEP..END_STEP of one mode ('*' as END_STEP = to the end).",
        [
            arg("start_step"),
            arg("end_step", required=False),
            click.Option(["--mode"], default="train", show_default=True, help="Mode of both ends."),
            click.Option(["--start-phase"], default="stepstart", show_default=True, help="Phase of the start step."),
            click.Option(["--end-phase"], default="stepend", show_default=True, help="Phase of the end step."),
        ],
        lambda start_step, end_step, mode, start_phase, end_phase: {
            "start_step": start_step, "end_step": end_step, "mode": mode, "start_phase": start_phase, "end_phase": end_phase,
        },
    )
    command(
        "between-modes", "between_modes", "the intervals that start in START_MODE and end in END_MODE.",
        [arg("start_mode"), arg("end_mode")],
        lambda start_mode, end_mode: {"start_mode": start_mode, "end_mode": end_mode},
    )
    command("pre-step-zero", "pre_step_zero", "the intervals from the start of the job until step 0.", [], dict)
    command("post-hook-close", "post_hook_close", "the intervals after the hook closed.", [], dict)
    command("by-training-phase", "by_training_phase", "every interval of a mode pair (the same as job).", [], dict)
    command("by-job-phase", "by_job_phase", "every interval of every job phase (the same as job).", [], dict)
