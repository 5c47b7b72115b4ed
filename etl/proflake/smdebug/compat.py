"""smdebug-compatible analysis classes, answered from a proflake store.

A notebook written for ``smdebug.profiler.analysis.python_profile_analysis`` keeps working when only
its import line changes::

    from proflake import cProfileAnalysis, PythonProfileModes, StepPhase, Metrics

    analysis = cProfileAnalysis(local_profile_dir="/tmp/python_stats")
    stats = analysis.fetch_profile_stats_by_step(5, mode=PythonProfileModes.TRAIN)
    stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=10)

Where the data comes from:

* ``s3_path``: that prefix is ingested (incrementally) into the store; ``local_profile_dir`` is then
  ignored (smdebug used it as a download folder; proflake reads S3 directly).
* else ``local_profile_dir``: that folder is ingested incrementally; one that does not exist is an
  error. Left at smdebug's default (``/tmp/python_stats``), it is used only when it exists and no
  ``store`` was given: ``cProfileAnalysis(store=...)`` alone queries the store as it is.
* ``store`` (default: ``$PROFLAKE_STORE`` or ``./proflake-store``) is where the rows go and where the
  questions are answered.

When a source was given, every question sees only the stats files below that source, exactly the files
smdebug would have read, however many other jobs the store holds. Without a source the store is queried
as it is (pass ``job=`` when it holds several jobs).

``refresh_stats=True`` (every method's default, as in smdebug) re-runs the incremental ingest of the
source, which is cheap when nothing changed, then re-reads the store; ``refresh_stats=False`` reuses the
cached view.

Differences from smdebug, all deliberate:

* ``fetch_profile_stats_by_time`` also matches an interval that contains the whole window.
* ``fetch_profile_stats_by_job_phase`` aggregates every interval of a phase (smdebug kept the last mode
  pair's), files the post-hook-close interval under finalization (smdebug: initialization), always
  returns a ``training_loop`` entry (an empty cProfileStats when there is none) and adds ``whole_job``
  when an interval spans the whole job.
* ``cProfileStats.get_function_stats`` returns a real DataFrame with five columns.
* An unknown mode, phase or node id raises ``proflake.errors.UnknownNameError`` (a ValueError) instead of
  silently matching nothing; ``node_id="all"`` aggregates every node (proflake's addition).
* ``list_profile_stats`` gives modes as their directory-name strings (``"train"``) and phases as
  ``StepPhase`` members, like smdebug; it returns an empty DataFrame (after printing smdebug's message)
  when there are no stats.
* ``PyinstrumentStepStats.json_stats`` is rebuilt from the store (same fields, same call tree) rather
  than re-read from the file, so it answers even when the files are gone.

pandas is imported only by the methods that return DataFrames.
"""

from __future__ import annotations

import logging
import os
import pstats
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from proflake.errors import SourceError
from proflake.ingestion.batch import IngestReport
from proflake.modes import Metrics, PythonProfileModes, StepPhase, parse_mode, parse_phase
from proflake.query.profiles import FetchResult, Profiles, Step
from proflake.readers.pyinstrument import dumps_tree
from proflake.store.store import Store

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = [
    "Metrics",
    "PyinstrumentAnalysis",
    "PyinstrumentStepStats",
    "PythonProfileAnalysis",
    "PythonProfileModes",
    "StepPhase",
    "cProfileAnalysis",
    "cProfileFunctionStats",
    "cProfileStats",
]

log = logging.getLogger(__name__)

SMDEBUG_LOCAL_PROFILE_DIR = "/tmp/python_stats"  # where the default below looks (read at call time)


class _SmdebugDefaultDir(str):
    """smdebug's default local_profile_dir, told apart (by identity) from the same path passed on purpose."""


_DEFAULT_LOCAL_DIR = _SmdebugDefaultDir(SMDEBUG_LOCAL_PROFILE_DIR)
NO_STATS_FOUND = "No stats were found!"
NO_STATS_FOR_INTERVAL = "No stats were found for the requested interval!"

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
JOB_PHASES = ("initialization", "training_loop", "finalization", "whole_job")


# -- result objects -----------------------------------------------------------------------------------
class cProfileFunctionStats:
    """One function of a cProfile aggregate, from a pstats entry ``key -> (cc, nc, tt, ct, callers)``."""

    def __init__(self, key: tuple[str, int, str], value: tuple) -> None:
        cc, nc, tt, ct, callers = value
        self.key = key
        self.function_name = pstats.func_std_string(key)
        self.prim_calls = cc
        self.total_calls = nc
        self.total_time = tt
        self.cumulative_time = ct
        self.callers = [pstats.func_std_string(caller) for caller in callers]

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
        self.ps = ps
        # smdebug builds function_stats_list here; built when first read instead, it costs nothing to
        # callers that never read it (~1 ms of a one-step fetch for ~270 functions). The shallow copy
        # keeps the list what it would have been here if ps is later added to (add writes into its dict).
        self._functions = dict(ps.stats)

    @cached_property
    def function_stats_list(self) -> list[cProfileFunctionStats]:
        """One cProfileFunctionStats per function, in ``ps.stats`` order as this object was made."""
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
        import pandas as pd

        return pd.DataFrame(
            [f.as_dict() for f in self.function_stats_list], columns=list(FUNCTION_STATS_COLUMNS)
        )

    def __repr__(self) -> str:
        return f"<cProfileStats: {len(self._functions)} functions from {len(self.ps.files)} file(s)>"


class PyinstrumentStepStats:
    """One pyinstrument interval: its HTML report's path and its session as pyinstrument's JSON dict."""

    def __init__(self, html_file_path: str | None, json_stats: dict) -> None:
        self.html_file_path = html_file_path
        self.json_stats = json_stats

    def show_html(self):
        """Display the HTML report in a notebook (needs IPython)."""
        from IPython.display import IFrame

        return IFrame(src=self.html_file_path, width="100%", height=600)

    def __repr__(self) -> str:
        return f"<PyinstrumentStepStats {self.html_file_path}>"


# -- where the answers come from ----------------------------------------------------------------------
def _prefix(uri: str) -> str:
    """The source URI as a prefix that matches files below it only (not ``/data/job10`` for ``/data/job1``)."""
    sep = "/" if "://" in uri else os.sep
    return uri if uri.endswith(sep) else uri + sep


class PythonProfileAnalysis:
    """smdebug's PythonProfileAnalysis: the fetch methods shared by both profilers."""

    name = ""  # the profiler: "cprofile" or "pyinstrument"

    def __init__(
        self,
        local_profile_dir: str | os.PathLike | None = _DEFAULT_LOCAL_DIR,
        s3_path: str | None = None,
        *,
        store: Store | str | os.PathLike | None = None,
        job: str | Sequence[str] | None = None,
    ) -> None:
        if not self.name:
            raise TypeError("use cProfileAnalysis or PyinstrumentAnalysis")
        self.store = store if isinstance(store, Store) else Store(store)
        self.job = job
        self.source = self._source(local_profile_dir, s3_path, store_given=store is not None)
        self.profiles = Profiles(self.store)
        self.last_ingest: IngestReport | None = None
        if self.source is not None:
            self._ingest()

    @staticmethod
    def _source(
        local_profile_dir: str | os.PathLike | None, s3_path: str | None, *, store_given: bool
    ) -> str | None:
        if s3_path:
            return str(s3_path)
        if local_profile_dir is None:
            return None
        if local_profile_dir is _DEFAULT_LOCAL_DIR:
            # Nobody pointed at it: read it as smdebug would, unless a store says where the stats are.
            default = Path(SMDEBUG_LOCAL_PROFILE_DIR)
            return str(default) if not store_given and default.is_dir() else None
        path = Path(local_profile_dir).expanduser()
        if not path.exists():
            raise SourceError(
                f"local_profile_dir {str(local_profile_dir)!r} does not exist; pass the folder that holds "
                "framework/, or store= alone to query a proflake store as it is"
            )
        return str(path)

    def _ingest(self) -> None:
        assert self.source is not None
        report = self.profiles.ingest(self.source, qualify_jobs=True)
        self.last_ingest = report
        for failed in report.failed:
            log.warning("skipped %s (%s): %s", failed.uri, failed.kind, failed.message)
        # report.source is the resolved source URI, the prefix of every source_uri ingested from it.
        self.profiles.source_prefix = _prefix(report.source)

    def _refresh(self, refresh_stats: bool) -> None:
        if refresh_stats:
            if self.source is not None:
                self._ingest()  # Profiles.ingest refreshes the connection
            else:
                self.profiles.refresh()

    def _scope(self) -> dict[str, Any]:
        # With a source, the view already holds only its files: every job below it counts, as in smdebug.
        return {"job": self.job, "all_jobs": self.job is None and self.source is not None}

    def _fetch(self, method: str, node_id: str | None, refresh_stats: bool, **arguments: Any) -> FetchResult:
        self._refresh(refresh_stats)
        # Every cProfile answer becomes a pstats.Stats, which needs the caller edges too.
        wants_callers = self.name == "cprofile"
        return self.profiles.fetch(method, profiler=self.name, node=node_id, callers=wants_callers, **self._scope(), **arguments)

    # Each profiler turns the selected intervals (or one group of them) into its result objects.
    def _aggregate(self, result: FetchResult, group: tuple = ()) -> Any:
        raise NotImplementedError

    def _result(self, result: FetchResult) -> Any:
        if result.empty:
            print(NO_STATS_FOR_INTERVAL)
            return None
        return self._aggregate(result)

    # -- smdebug's fetch methods ------------------------------------------------------------------------
    def fetch_profile_stats_by_step(
        self,
        start_step: Step,
        end_step: Step | None = None,
        mode: PythonProfileModes | str = PythonProfileModes.TRAIN,
        start_phase: StepPhase | str = StepPhase.STEP_START,
        end_phase: StepPhase | str = StepPhase.STEP_END,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Intervals of one mode within steps start_step..end_step (end_step defaults to start_step)."""
        mode, start_phase, end_phase = parse_mode(mode), parse_phase(start_phase), parse_phase(end_phase)
        return self._result(
            self._fetch(
                "by_step",
                node_id,
                refresh_stats,
                start_step=start_step,
                end_step=end_step,
                mode=mode,
                start_phase=start_phase,
                end_phase=end_phase,
            )
        )

    def fetch_profile_stats_by_time(
        self,
        start_time_since_epoch_in_secs: float,
        end_time_since_epoch_in_secs: float,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Intervals overlapping the window (seconds since the epoch), including one containing it."""
        return self._result(
            self._fetch(
                "by_time",
                node_id,
                refresh_stats,
                start_time_s=start_time_since_epoch_in_secs,
                end_time_s=end_time_since_epoch_in_secs,
            )
        )

    def fetch_profile_stats_between_modes(
        self,
        start_mode: PythonProfileModes | str,
        end_mode: PythonProfileModes | str,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Intervals that start in start_mode and end in end_mode."""
        start_mode, end_mode = parse_mode(start_mode), parse_mode(end_mode)
        return self._result(
            self._fetch("between_modes", node_id, refresh_stats, start_mode=start_mode, end_mode=end_mode)
        )

    def fetch_pre_step_zero_profile_stats(
        self, node_id: str | None = "any", refresh_stats: bool = True
    ) -> Any:
        """Intervals from the start of the job (start phase 'start')."""
        return self._result(self._fetch("pre_step_zero", node_id, refresh_stats))

    def fetch_post_hook_close_profile_stats(
        self, node_id: str | None = "any", refresh_stats: bool = True
    ) -> Any:
        """Intervals to the end of the job (end phase 'end')."""
        return self._result(self._fetch("post_hook_close", node_id, refresh_stats))

    # The names AWS's documentation uses.
    def fetch_python_profile_stats_by_time(
        self,
        start_time_since_epoch_in_secs: float,
        end_time_since_epoch_in_secs: float,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Alias of fetch_profile_stats_by_time."""
        return self.fetch_profile_stats_by_time(
            start_time_since_epoch_in_secs,
            end_time_since_epoch_in_secs,
            node_id=node_id,
            refresh_stats=refresh_stats,
        )

    def fetch_python_profile_stats_by_step(
        self,
        start_step: Step,
        end_step: Step | None = None,
        mode: PythonProfileModes | str = PythonProfileModes.TRAIN,
        start_phase: StepPhase | str = StepPhase.STEP_START,
        end_phase: StepPhase | str = StepPhase.STEP_END,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Alias of fetch_profile_stats_by_step."""
        return self.fetch_profile_stats_by_step(
            start_step, end_step, mode, start_phase, end_phase, node_id=node_id, refresh_stats=refresh_stats
        )

    # -- grouped fetches --------------------------------------------------------------------------------
    def fetch_profile_stats_by_training_phase(
        self, node_id: str | None = "any", refresh_stats: bool = True
    ) -> dict[tuple[PythonProfileModes, PythonProfileModes], Any]:
        """One result per (start mode, end mode) pair present, in PythonProfileModes x PythonProfileModes order."""
        result = self._fetch("by_training_phase", node_id, refresh_stats)
        present = {
            (r["start_mode"], r["end_mode"])
            for r in result.intervals.select(["start_mode", "end_mode"]).to_pylist()
        }
        stats = {}
        for start in PythonProfileModes:
            for end in PythonProfileModes:
                if (start.label, end.label) in present:
                    stats[(start, end)] = self._aggregate(result, (start.label, end.label))
        if not stats:
            print(NO_STATS_FOR_INTERVAL)
        return stats

    def fetch_profile_stats_by_job_phase(
        self, node_id: str | None = "any", refresh_stats: bool = True
    ) -> dict[str, Any]:
        """Results keyed initialization, training_loop, finalization (and whole_job when present).

        initialization and finalization are None when no interval falls in them; training_loop is always
        a result (empty when no interval does)."""
        result = self._fetch("by_job_phase", node_id, refresh_stats)
        present = set(result.intervals["job_phase"].to_pylist())
        stats: dict[str, Any] = {}
        for phase in JOB_PHASES:
            if phase in present or phase == "training_loop":
                stats[phase] = self._aggregate(result, (phase,))
            elif phase != "whole_job":
                stats[phase] = None
        return stats

    # -- listings ---------------------------------------------------------------------------------------
    def list_profile_stats(self, refresh_stats: bool = True) -> pandas.DataFrame:
        """One row per stats file of this profiler, ordered by start time then node."""
        import pandas as pd

        self._refresh(refresh_stats)
        table = self.profiles.list_profile_stats(profiler=self.name, **self._scope())
        if not table.num_rows:
            print(NO_STATS_FOUND)
            return pd.DataFrame([], columns=list(LIST_COLUMNS))  # as smdebug's: every column of objects
        # Column by column: 10,000 intervals took ~215 ms as a dict per row (to_pylist), more than
        # smdebug's own listing; pandas infers each column's type from the same Python values either way.
        phases = {name: parse_phase(name) for column in ("start_phase", "end_phase")
                  for name in pc.unique(table[column]).to_pylist()}
        columns = {  # in LIST_COLUMNS order
            "profiler_name": [self.name] * table.num_rows,
            "framework": table["framework"].to_pylist(),
            "node_id": table["node_id"].to_pylist(),
            "start_mode": table["start_mode"].to_pylist(),
            "start_step": table["start_step"].to_pylist(),
            "start_phase": [phases[p] for p in table["start_phase"].to_pylist()],
            "start_time_since_epoch_in_micros": table["start_time_us"].to_pylist(),
            "end_mode": table["end_mode"].to_pylist(),
            "end_step": [float("inf") if step is None else step for step in table["end_step"].to_pylist()],
            "end_phase": [phases[p] for p in table["end_phase"].to_pylist()],
            "end_time_since_epoch_in_micros": table["end_time_us"].to_pylist(),
            "stats_path": table["source_uri"].to_pylist(),
        }
        return pd.DataFrame(columns, columns=list(LIST_COLUMNS))

    def list_available_node_ids(self, refresh_stats: bool = True) -> list[str]:
        """The nodes that have stats of this profiler, sorted."""
        self._refresh(refresh_stats)
        return self.profiles.nodes(profiler=self.name, **self._scope())

    def close(self) -> None:
        self.profiles.close()

    def __repr__(self) -> str:
        where = self.source if self.source is not None else "(whole store)"
        return f"{type(self).__name__}(source={where!r}, store={self.store.location!r})"


class cProfileAnalysis(PythonProfileAnalysis):
    """smdebug's cProfileAnalysis: fetch methods return a cProfileStats (None when nothing matched)."""

    name = "cprofile"

    def _aggregate(self, result: FetchResult, group: tuple = ()) -> cProfileStats:
        return cProfileStats(result.to_pstats(group))


class PyinstrumentAnalysis(PythonProfileAnalysis):
    """smdebug's PyinstrumentAnalysis: fetch methods return one PyinstrumentStepStats per interval."""

    name = "pyinstrument"

    def _aggregate(self, result: FetchResult, group: tuple = ()) -> list[PyinstrumentStepStats]:
        intervals = result.group_intervals(group).to_pylist()  # in smdebug's order: start time, then node
        if not intervals:
            return []
        frames = self.profiles.sql(
            "SELECT * FROM pyinstrument_frames WHERE list_contains($ids, interval_id) ORDER BY interval_id, frame_id",
            {"ids": [i["interval_id"] for i in intervals]},
        ).to_pylist()
        by_interval: dict[str, list[dict]] = {}
        for frame in frames:
            by_interval.setdefault(frame["interval_id"], []).append(frame)
        return [
            PyinstrumentStepStats(_html_path(i), _session(i, by_interval.get(i["interval_id"], [])))
            for i in intervals
        ]


def _html_path(interval: dict) -> str:
    # smdebug derived it from the JSON's path; the store records the HTML found beside it.
    if interval.get("html_uri"):
        return interval["html_uri"]
    uri = interval["source_uri"]
    return uri[: -len(".json")] + ".html" if uri.endswith(".json") else uri


def _session(interval: dict, frames: list[dict]) -> dict:
    return {
        "start_time": interval.get("session_start_time"),
        "duration": interval.get("session_duration_s"),
        "sample_count": interval.get("session_sample_count"),
        "target_description": interval.get("session_target"),
        "cpu_time": interval.get("session_cpu_time_s"),
        "root_frame": dumps_tree(frames),
    }
