"""smdebug's analysis classes (``PythonProfileAnalysis`` and its two profilers), answered from a store.

Where the answers come from, how a refresh works and every difference from smdebug: see
``proflake.smdebug.compat`` and docs/smdebug-compatibility.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from proflake.errors import MissingFolderError
from proflake.formats import is_caller_graph
from proflake.ingestion.batch import IngestReport
from proflake.ingestion.probe import Known, probe
from proflake.modes import PythonProfileModes, StepPhase, parse_mode, parse_phase
from proflake.query.params import parse_step
from proflake.query.profiles import Step
from proflake.smdebug.store_view import Answer, default_store, view_for
from proflake.sources import Source, open_source
from proflake.store.store import Store

if TYPE_CHECKING:  # pragma: no cover
    import pandas

log = logging.getLogger("proflake.smdebug")

SMDEBUG_LOCAL_PROFILE_DIR = "/tmp/python_stats"  # where the default below looks (read at call time)
NO_STATS_FOUND = "No stats were found!"
NO_STATS_FOR_INTERVAL = "No stats were found for the requested interval!"
JOB_PHASES = ("initialization", "training_loop", "finalization", "whole_job")
INGEST_WAIT_S = 60.0  # another notebook ingesting into the same store: wait for it rather than fail


class _SmdebugDefaultDir(str):
    """smdebug's default local_profile_dir, told apart (by identity) from the same path passed on purpose."""


_DEFAULT_LOCAL_DIR = _SmdebugDefaultDir(SMDEBUG_LOCAL_PROFILE_DIR)


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
        self.store = store if isinstance(store, Store) else Store(store if store is not None else default_store())
        self.job = job
        self.source = self._source(local_profile_dir, s3_path, store_given=store is not None)
        self.last_ingest: IngestReport | None = None
        self._src: Source | None = open_source(self.source) if self.source is not None else None
        # With a source, the resolved source URI is the prefix of every source_uri ingested from it.
        self._view = view_for(self.store, self._src.uri if self._src is not None else None)
        self.profiles = self._view.profiles
        self._entries: tuple[int, list] | None = None  # (view generation, python_profile_stats)
        if self._src is not None:
            self._ingest_if_new()

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
            raise MissingFolderError(
                f"local_profile_dir {str(local_profile_dir)!r} does not exist; pass the folder that holds "
                "framework/, or store= alone to query a proflake store as it is"
            )
        return str(path)

    # -- refresh ------------------------------------------------------------------------------------
    def _known(self) -> Known:
        """The files the current view answers from and those the store quarantined, at their versions
        (kept until the view changes: an unchanged job pays for this once, not at every call)."""
        if self._view.known is None:
            known: dict[str, tuple[int, str]] = {}
            self._view.store_exists = self.store.exists()
            if self._view.store_exists:
                for table in (self.profiles.errors(), self.profiles.intervals_table()):
                    known.update(
                        zip(
                            table["source_uri"].to_pylist(),
                            zip(table["source_size"].to_pylist(), table["source_version"].to_pylist()),
                        )
                    )
            self._view.known = known
        return self._view.known

    def _ingest_if_new(self) -> None:
        """Ingest the source when its listing shows a new or changed stats file, or when the store does not
        exist yet: a job that has written no stats file yet gets an empty store, so every answer is
        smdebug's empty one (no stats), not a missing store. Otherwise do nothing."""
        assert self._src is not None
        self._view.follow_store()
        if probe(self._src, self._known()).unchanged and self._view.store_exists:
            return
        report = self.profiles.ingest(self._src, wait=INGEST_WAIT_S, qualify_jobs=True)  # refreshes the view
        self.last_ingest = report
        self._view.refreshed()
        for failed in report.failed:
            log.warning("skipped %s (%s): %s", failed.uri, failed.kind, failed.message)

    def _refresh(self, refresh_stats: bool) -> None:
        if refresh_stats:
            if self._src is not None:
                self._ingest_if_new()
            elif not self.store.is_remote:
                self._view.follow_store()  # reopened only if the store's Delta logs moved on
            else:
                self.profiles.refresh()
                self._view.refreshed()

    def _scope(self) -> dict[str, Any]:
        # With a source, the view already holds only its files: every job below it counts, as in smdebug.
        return {"job": self.job, "all_jobs": self.job is None and self.source is not None}

    def _fetch(self, method: str, node_id: str | None, refresh_stats: bool, **arguments: Any) -> Answer:
        """The answer of the current view, fetched unless the same question was asked since it changed
        (the view keeps it: the data it came from is the same, so is the answer)."""
        self._refresh(refresh_stats)
        job = self.job if self.job is None or isinstance(self.job, str) else tuple(self.job)
        key = (self.name, method, node_id, job, tuple(sorted(arguments.items())))
        # Every cProfile answer becomes a pstats.Stats, which needs the caller edges too.
        wants_callers = is_caller_graph(self.name)
        return self._view.answer(
            key,
            lambda: self.profiles.fetch(
                method, profiler=self.name, node=node_id, callers=wants_callers, **self._scope(), **arguments
            ),
        )

    # Each profiler turns the selected intervals (or one group of them) into its result objects.
    def _aggregate(self, answer: Answer, group: tuple = ()) -> Any:
        raise NotImplementedError

    def _result(self, answer: Answer) -> Any:
        if answer.result.empty:
            print(NO_STATS_FOR_INTERVAL)
            return None
        return self._aggregate(answer)

    # -- smdebug's fetch methods ------------------------------------------------------------------------
    def fetch_profile_stats_by_step(
        self,
        start_step: Step,
        end_step: Step | None = None,
        mode: PythonProfileModes | str | int = PythonProfileModes.TRAIN,
        start_phase: StepPhase | str = StepPhase.STEP_START,
        end_phase: StepPhase | str = StepPhase.STEP_END,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Intervals of one mode within steps start_step..end_step (end_step defaults to start_step).
        A range that ends before it starts matches nothing, as in smdebug."""
        mode, start_phase, end_phase = parse_mode(mode), parse_phase(start_phase), parse_phase(end_phase)
        if end_step is not None and parse_step(end_step, at_end=True) < parse_step(start_step, at_end=False):
            self._refresh(refresh_stats)
            print(NO_STATS_FOR_INTERVAL)
            return None
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
        """Intervals overlapping the window (seconds since the epoch), including one containing it.
        A window that ends before it starts matches nothing, as in smdebug."""
        if end_time_since_epoch_in_secs < start_time_since_epoch_in_secs:
            self._refresh(refresh_stats)
            print(NO_STATS_FOR_INTERVAL)
            return None
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
        start_mode: PythonProfileModes | str | int,
        end_mode: PythonProfileModes | str | int,
        node_id: str | None = "any",
        refresh_stats: bool = True,
    ) -> Any:
        """Intervals that start in start_mode and end in end_mode."""
        start_mode, end_mode = parse_mode(start_mode), parse_mode(end_mode)
        return self._result(
            self._fetch("between_modes", node_id, refresh_stats, start_mode=start_mode, end_mode=end_mode)
        )

    def fetch_pre_step_zero_profile_stats(self, node_id: str | None = "any", refresh_stats: bool = True) -> Any:
        """Intervals from the start of the job (start phase 'start')."""
        return self._result(self._fetch("pre_step_zero", node_id, refresh_stats))

    def fetch_post_hook_close_profile_stats(self, node_id: str | None = "any", refresh_stats: bool = True) -> Any:
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
            start_time_since_epoch_in_secs, end_time_since_epoch_in_secs, node_id=node_id, refresh_stats=refresh_stats
        )

    def fetch_python_profile_stats_by_step(
        self,
        start_step: Step,
        end_step: Step | None = None,
        mode: PythonProfileModes | str | int = PythonProfileModes.TRAIN,
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
            for r in result.result.intervals.select(["start_mode", "end_mode"]).to_pylist()
        }
        stats = {}
        for start in PythonProfileModes:
            for end in PythonProfileModes:
                if (start.label, end.label) in present:
                    stats[(start, end)] = self._aggregate(result, (start.label, end.label))
        if not stats:
            print(NO_STATS_FOR_INTERVAL)
        return stats

    def fetch_profile_stats_by_job_phase(self, node_id: str | None = "any", refresh_stats: bool = True) -> dict[str, Any]:
        """Results keyed by job phase: initialization, training_loop, finalization, whole_job.

        A phase no interval falls in is left out, except training_loop, which is always there (an empty
        result when no interval falls in it), as in smdebug."""
        result = self._fetch("by_job_phase", node_id, refresh_stats)
        present = set(result.result.intervals["job_phase"].to_pylist())
        return {
            phase: self._aggregate(result, (phase,))
            for phase in JOB_PHASES
            if phase in present or phase == "training_loop"
        }

    # -- listings ---------------------------------------------------------------------------------------
    @property
    def python_profile_stats(self) -> list:
        """smdebug's list of StepPythonProfileStats, one per stats file of this profiler (a pyinstrument
        interval lists its .html then its .json), ordered by start time then node; as of the last refresh."""
        if self._entries is None or self._entries[0] != self._view.generation:
            from proflake.smdebug.stats import StepPythonProfileStats

            columns = self._listing()
            names = list(columns)
            self._entries = (
                self._view.generation,
                [StepPythonProfileStats(**dict(zip(names, values))) for values in zip(*columns.values())],
            )
        return list(self._entries[1])

    def _listing(self) -> dict[str, list]:
        """The listing's columns (smdebug's, in its order), from the current view without refreshing."""
        from proflake.smdebug.stats import LIST_COLUMNS

        table = self.profiles.list_profile_stats(profiler=self.name, **self._scope())
        paths = table["source_uri"].to_pylist()
        if not is_caller_graph(self.name):
            # Two entries per interval, as smdebug lists both files: the html's (where one was found) first.
            rows, both = [], []
            for row, (html, json_path) in enumerate(zip(table["html_uri"].to_pylist(), paths)):
                if html:
                    rows.append(row)
                    both.append(html)
                rows.append(row)
                both.append(json_path)
            table, paths = table.take(pa.array(rows, pa.int64())), both
        # Column by column: 10,000 intervals took ~215 ms as a dict per row (to_pylist).
        modes = {m.label: m for m in PythonProfileModes}
        phases = {
            name: parse_phase(name)
            for column in ("start_phase", "end_phase")
            for name in pc.unique(table[column]).to_pylist()
        }
        columns = {
            "profiler_name": [self.name] * table.num_rows,
            "framework": table["framework"].to_pylist(),
            "node_id": table["node_id"].to_pylist(),
            "start_mode": [modes[m] for m in table["start_mode"].to_pylist()],
            "start_step": table["start_step"].to_pylist(),
            "start_phase": [phases[p] for p in table["start_phase"].to_pylist()],
            "start_time_since_epoch_in_micros": table["start_time_us"].to_pylist(),
            "end_mode": [modes[m] for m in table["end_mode"].to_pylist()],
            "end_step": [float("inf") if step is None else step for step in table["end_step"].to_pylist()],
            "end_phase": [phases[p] for p in table["end_phase"].to_pylist()],
            "end_time_since_epoch_in_micros": table["end_time_us"].to_pylist(),
            "stats_path": paths,
        }
        assert tuple(columns) == LIST_COLUMNS
        return columns

    def list_profile_stats(self, refresh_stats: bool = True) -> pandas.DataFrame:
        """One row per stats file of this profiler (two per pyinstrument interval: .html and .json),
        ordered by start time then node; modes as their directory-name strings, as smdebug gives them."""
        from proflake.smdebug.stats import LIST_COLUMNS, import_pandas

        pd = import_pandas("list_profile_stats")
        self._refresh(refresh_stats)
        columns = self._listing()
        if not columns["stats_path"]:
            print(NO_STATS_FOUND)
            return pd.DataFrame([], columns=list(LIST_COLUMNS))  # every column, of objects
        for column in ("start_mode", "end_mode"):
            columns[column] = [m.label for m in columns[column]]
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
