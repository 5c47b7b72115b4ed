"""The result objects of the smdebug-compatible classes: smdebug's names, attributes and methods.

* ``StepPythonProfileStats``: one listed stats file's metadata (``analysis.python_profile_stats``).
* ``cProfileStats`` / ``cProfileFunctionStats``: a cProfile aggregate and its functions.
* ``PyinstrumentStepStats``: one pyinstrument interval, its html report's path and its JSON document.
"""

from __future__ import annotations

import pstats
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from proflake.errors import MissingExtraError
from proflake.modes import Metrics, PythonProfileModes, StepPhase

if TYPE_CHECKING:  # pragma: no cover
    import pandas

LIST_COLUMNS = (
    "profiler_name",
    "framework",
    "node_id",
    "start_mode",
    "start_step",
    "start_phase",
    "start_time_since_epoch_in_micros",
    "end_mode",
    "end_step",
    "end_phase",
    "end_time_since_epoch_in_micros",
    "stats_path",
)
FUNCTION_STATS_COLUMNS = (
    "function name",
    "# of primitive calls",
    "# of total calls",
    "total time",
    "cumulative time",
)


def import_pandas(what: str):
    """pandas, or one sentence naming the extra that installs it (a ModuleNotFoundError too)."""
    try:
        import pandas
    except ModuleNotFoundError as e:
        raise MissingExtraError(
            f"{what} returns a pandas DataFrame and pandas is not installed; pip install 'proflake[pandas]'"
        ) from e
    return pandas


class StepPythonProfileStats:
    """smdebug's metadata of one stats file (for pyinstrument, one entry for the .json and one for the
    .html of each interval), with smdebug's attributes in smdebug's order; ``print`` shows them as a dict.
    Modes are ``PythonProfileModes``, phases ``StepPhase``, a ``*`` end step is infinity."""

    # The attributes, one per LIST_COLUMNS entry (set by __init__ through __dict__: the object is read-only).
    profiler_name: str
    framework: str
    node_id: str
    start_mode: PythonProfileModes
    start_step: int
    start_phase: StepPhase
    start_time_since_epoch_in_micros: float
    end_mode: PythonProfileModes
    end_step: float  # infinity for "*"
    end_phase: StepPhase
    end_time_since_epoch_in_micros: float
    stats_path: str

    def __init__(self, **values: Any) -> None:
        self.__dict__.update((name, values[name]) for name in LIST_COLUMNS)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: it describes a file in the store")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepPythonProfileStats) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.__dict__)

    # smdebug's filters, for code that calls them on the listed entries.
    def has_start_and_end_mode(self, start_mode: PythonProfileModes, end_mode: PythonProfileModes) -> bool:
        return self.start_mode == start_mode and self.end_mode == end_mode

    def in_time_interval(self, start_time_since_epoch_in_micros: float, end_time_since_epoch_in_micros: float) -> bool:
        return (
            start_time_since_epoch_in_micros <= self.start_time_since_epoch_in_micros <= end_time_since_epoch_in_micros
            or start_time_since_epoch_in_micros <= self.end_time_since_epoch_in_micros <= end_time_since_epoch_in_micros
        )

    def has_pre_step_zero_profile_stats(self) -> bool:
        return self.start_phase == StepPhase.START

    def has_post_hook_close_profile_stats(self) -> bool:
        return self.end_phase == StepPhase.END

    def has_node_id(self, node_id: str) -> bool:
        return self.node_id == node_id


class cProfileFunctionStats:
    """One function of a cProfile aggregate, from a pstats entry ``key -> (cc, nc, tt, ct, callers)``."""

    def __init__(self, key: tuple[str, int, str], value: tuple) -> None:
        cc, nc, tt, ct, callers = value
        self.key = key
        self.function_name = pstats.func_std_string(key)  # type: ignore[attr-defined]  # a pstats function typeshed omits
        self.prim_calls = cc
        self.total_calls = nc
        self.total_time = tt
        self.cumulative_time = ct
        self.callers = [pstats.func_std_string(caller) for caller in callers]  # type: ignore[attr-defined]  # a pstats function typeshed omits

    def as_dict(self) -> dict[str, Any]:
        return dict(
            zip(
                FUNCTION_STATS_COLUMNS,
                (
                    self.function_name,
                    self.prim_calls,
                    self.total_calls,
                    self.total_time,
                    self.cumulative_time,
                ),
            )
        )

    def __repr__(self) -> str:
        return repr(self.as_dict())


class cProfileStats:
    """An aggregate of cProfile intervals: ``ps`` is a real ``pstats.Stats`` (callers included)."""

    def __init__(self, ps: pstats.Stats) -> None:
        self._ps: pstats.Stats | None = ps
        self._make: Callable[[], pstats.Stats] | None = None
        # smdebug builds function_stats_list here; built when first read instead, it costs nothing to
        # callers that never read it (~1 ms of a one-step fetch for ~270 functions). The shallow copy
        # keeps the list what it would have been here if ps is later added to (add writes into its dict).
        self._functions = dict(ps.stats)  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets

    @classmethod
    def deferred(cls, make: Callable[[], pstats.Stats]) -> cProfileStats:
        """A result whose ``ps`` is built by ``make`` when first used: a roll-up returns one per group,
        and a notebook usually reads one or two of them (building each pstats.Stats is most of a
        roll-up's cost)."""
        self = cls.__new__(cls)
        self._ps, self._make, self._functions = None, make, {}
        return self

    @property
    def ps(self) -> pstats.Stats:
        if self._ps is None:
            assert self._make is not None
            self._ps, self._make = self._make(), None
            self._functions = dict(self._ps.stats)  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        return self._ps

    @cached_property
    def function_stats_list(self) -> list[cProfileFunctionStats]:
        """One cProfileFunctionStats per function, in ``ps.stats`` order as this object was made."""
        self.ps  # noqa: B018  # a deferred result is built first
        return [cProfileFunctionStats(key, value) for key, value in self._functions.items()]

    def print_top_n_functions(self, by: Metrics, n: int = 10) -> None:
        """Print the n top functions by a metric, as ``pstats`` prints them."""
        # AssertionError, as smdebug's asserts raise, so notebooks that catch it keep working.
        if not isinstance(by, Metrics):
            raise AssertionError(  # noqa: TRY004
                f"by must be a Metrics member (e.g. Metrics.CUMULATIVE_TIME), not {by!r}"
            )
        if isinstance(n, bool) or not isinstance(n, int):
            raise AssertionError(f"n must be an int, not {n!r}")  # noqa: TRY004
        self.ps.sort_stats(by.value).print_stats(n)

    def get_function_stats(self) -> pandas.DataFrame:
        """One row per function: name, primitive calls, total calls, total time, cumulative time."""
        pd = import_pandas("get_function_stats")
        return pd.DataFrame(
            [f.as_dict() for f in self.function_stats_list], columns=list(FUNCTION_STATS_COLUMNS)
        )

    def __repr__(self) -> str:
        self.ps  # noqa: B018  # a deferred result is built first
        return f"<cProfileStats: {len(self._functions)} functions from {len(self.ps.files)} file(s)>"  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets


class PyinstrumentStepStats:
    """One pyinstrument interval: its HTML report's path and its JSON document, as the file holds it."""

    def __init__(self, html_file_path: str | None, json_stats: dict) -> None:
        self.html_file_path = html_file_path
        self.json_stats = json_stats

    def show_html(self):
        """Display the HTML report in a notebook (needs IPython)."""
        from IPython.display import IFrame

        return IFrame(src=self.html_file_path, width="100%", height=600)

    def __repr__(self) -> str:
        return f"<PyinstrumentStepStats {self.html_file_path}>"
