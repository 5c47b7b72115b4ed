"""The fetch methods, each described once: name, query, arguments, grouping, help, smdebug's name.

The Python API (``Profiles.fetch`` and its wrappers), the CLI (``proflake fetch <command>``), the
smdebug-compatible classes and the docs' checks all read this registry; nothing else lists the methods.
"""

from __future__ import annotations

from dataclasses import dataclass

from proflake.errors import UnknownNameError

REQUIRED = object()  # the default of an argument that has none


@dataclass(frozen=True)
class Argument:
    """One argument of a fetch method, beyond the scope options every method takes."""

    name: str  # the keyword in Python (Profiles.fetch(..., name=value))
    help: str
    default: object = REQUIRED  # REQUIRED: positional on the command line; otherwise an --option
    metavar: str | None = None  # the command line's name of a positional argument

    @property
    def positional(self) -> bool:
        return self.default is REQUIRED or self.metavar is not None

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class FetchMethod:
    name: str  # by_step: the Python method and queries/<name>.sql
    summary: str  # one sentence: the command's help, the docs
    smdebug: str  # smdebug's method on PythonProfileAnalysis
    arguments: tuple[Argument, ...] = ()
    group_by: tuple[str, ...] = ()  # result columns the answer is grouped by, beside --per-node's node_id

    @property
    def command(self) -> str:
        """The CLI's name: ``proflake fetch by-step``."""
        return self.name.replace("_", "-")

    @property
    def query(self) -> str:
        """The selection query's file in queries/."""
        return f"{self.name}.sql"

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments)


FETCH_METHODS: tuple[FetchMethod, ...] = (
    FetchMethod(
        "by_time",
        "Intervals overlapping [START, END], including one containing the window. Each is seconds since the "
        "epoch (1596585375) or ISO 8601 (\"2020-08-04 23:56:15\", UTC unless it has an offset).",
        "fetch_profile_stats_by_time",
        (
            Argument("start_time_s", "Start of the window: seconds since the epoch, ISO 8601 or a datetime.", metavar="START"),
            Argument("end_time_s", "End of the window: seconds since the epoch, ISO 8601 or a datetime.", metavar="END"),
        ),
    ),
    FetchMethod(
        "by_step",
        "Intervals in steps START_STEP..END_STEP (default START_STEP) of one mode; '*' as END_STEP = to the end "
        "(quote it: '*').",
        "fetch_profile_stats_by_step",
        (
            Argument("start_step", "First step (a whole number, or '*').", metavar="START_STEP"),
            Argument("end_step", "Last step (default START_STEP; '*' = to the end).", default=None, metavar="END_STEP"),
            Argument("mode", "Mode of both ends (train, eval, ... or TRAIN, EVAL, ...).", default="train"),
            Argument("start_phase", "Phase of the start step.", default="stepstart"),
            Argument("end_phase", "Phase of the end step.", default="stepend"),
        ),
    ),
    FetchMethod(
        "between_modes",
        "Intervals that start in START_MODE and end in END_MODE (e.g. train eval).",
        "fetch_profile_stats_between_modes",
        (
            Argument("start_mode", "Mode the intervals start in.", metavar="START_MODE"),
            Argument("end_mode", "Mode the intervals end in.", metavar="END_MODE"),
        ),
    ),
    FetchMethod(
        "pre_step_zero",
        "Intervals profiled from the start of the job until step 0.",
        "fetch_pre_step_zero_profile_stats",
    ),
    FetchMethod(
        "post_hook_close",
        "Intervals profiled after the hook closed, to the end of the job.",
        "fetch_post_hook_close_profile_stats",
    ),
    FetchMethod(
        "by_training_phase",
        "Functions aggregated per (start_mode, end_mode) pair present.",
        "fetch_profile_stats_by_training_phase",
        group_by=("start_mode", "end_mode"),
    ),
    FetchMethod(
        "by_job_phase",
        "Functions aggregated per job phase: initialization, training_loop, finalization, whole_job.",
        "fetch_profile_stats_by_job_phase",
        group_by=("job_phase",),
    ),
)
FETCH_METHOD_NAMES: tuple[str, ...] = tuple(m.name for m in FETCH_METHODS)
_BY_NAME = {m.name: m for m in FETCH_METHODS}


def fetch_method(name: str) -> FetchMethod:
    """The method called ``name`` (``by_step`` or ``by-step``); unknown names list the valid ones."""
    method = _BY_NAME.get(name.replace("-", "_"))
    if method is None:
        raise UnknownNameError("fetch method", name, FETCH_METHOD_NAMES)
    return method
