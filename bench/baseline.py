"""The baseline: what smdebug 1.0.34's ``cProfileAnalysis`` does on every call, re-implemented here.

smdebug is not a dependency (it pins old frameworks), so its analysis path is rewritten from its
semantics, step for step:

* ``LocalPythonStatsReader.load_python_profile_stats``: ``os.listdir`` the profiler folder
  (``framework/{fw}/cprofile``), each node folder and each stats folder; parse every stats folder name
  ``{mode}-{step}-{phase}-{time}_{mode}-{step}-{phase}-{time}`` (``*`` = -1 at the start, infinity at the
  end); sort by (start time, node). cProfileAnalysis keeps the cProfile entries.
* ``refresh_stats=True`` (every method's default) re-lists before answering; ``False`` reuses the list,
  but cProfileAnalysis still filters it to its cProfile entries on every call (its
  ``_refresh_python_profile_stats`` override runs the filter whatever ``refresh_stats`` says).
* Modes are ``PythonProfileModes`` (an IntEnum) and phases ``StepPhase`` (an Enum), built from the folder
  name's strings when it is parsed, and compared as such. The methods here also take the strings
  ("train", "stepstart"), which the benchmark passes, and turn them into the enums once per call.
* ``node_id="any"`` is the node of the first entry of that sorted list. smdebug has no "all nodes";
  here ``node_id=None`` skips the node filter (what a user looping over nodes would get).
* Filters: ``in_step_interval`` plus start mode == end mode == mode (by step); ``in_time_interval``
  (starts or ends inside the window); start and end mode (between modes); start phase ``start``
  (pre step zero); end phase ``end`` (post hook close).
* Aggregation: ``pstats.Stats()`` then ``.add(path)`` for each selected file, then ``cProfileStats(ps)``,
  which builds one ``cProfileFunctionStats`` per function. ``None`` when nothing matched.
* ``fetch_profile_stats_by_training_phase``: ``fetch_profile_stats_between_modes`` for each of the 6x6
  (start mode, end mode) pairs, keeping the non-empty ones.
* ``fetch_profile_stats_by_job_phase``: from the training-phase results, start mode prestepzero ->
  ``initialization`` (so the post-hook-close interval, which starts in mode prestepzero, overwrites the
  pre-step-zero one), end mode posthookclose -> ``finalization``, everything else ``ps.add``-ed into
  ``training_loop``.

Also here: the decode floor, reading every stats file and decoding it (``marshal.loads`` for cProfile,
``json.loads`` for pyinstrument), the least any ingest must do; and the Parquet floor, reading, parsing
and writing every file's rows to Parquet as the store does, the least an ingest into this store must do.
"""

from __future__ import annotations

import json
import marshal
import os
import pstats
import time
from enum import Enum, IntEnum
from pathlib import Path

# The folder-name spellings of PythonProfileModes, in smdebug's enum order (values 1..6).
MODES = ("train", "eval", "predict", "global", "prestepzero", "posthookclose")
CPROFILE_STATS_FILENAME = "python_stats"
PYINSTRUMENT_JSON_FILENAME = "python_stats.json"
PYINSTRUMENT_HTML_FILENAME = "python_stats.html"


# smdebug's own enums, not proflake.modes': the baseline must run smdebug's code whatever proflake's become.
class PythonProfileModes(IntEnum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
    PRE_STEP_ZERO = 5
    POST_HOOK_CLOSE = 6


class StepPhase(Enum):
    START = "start"
    STEP_START = "stepstart"
    FORWARD_PASS_END = "forwardpassend"
    STEP_END = "stepend"
    END = "end"


def str_to_python_profile_mode(mode_str: str) -> PythonProfileModes:
    if mode_str not in MODES:
        raise ValueError(f"Invalid mode {mode_str!r}")
    return PythonProfileModes(MODES.index(mode_str) + 1)


def python_profile_mode_to_str(mode: PythonProfileModes) -> str:
    return MODES[mode - 1]


def _mode(mode) -> PythonProfileModes:
    """A caller's mode as smdebug's enum (the benchmark passes the folder-name string)."""
    return mode if isinstance(mode, PythonProfileModes) else str_to_python_profile_mode(mode)


def _phase(phase) -> StepPhase:
    return phase if isinstance(phase, StepPhase) else StepPhase(phase)


class StepPythonProfileStats:
    """smdebug's per-file metadata, parsed from the stats folder name."""

    def __init__(self, framework: str, profiler_name: str, node_id: str, stats_dir: str, stats_path: str) -> None:
        start_metadata, end_metadata = stats_dir.split("_")
        start_mode, start_step, start_phase, start_time = start_metadata.split("-")
        end_mode, end_step, end_phase, end_time = end_metadata.split("-")

        self.profiler_name = profiler_name
        self.framework = framework
        self.node_id = node_id

        self.start_mode = PythonProfileModes(str_to_python_profile_mode(start_mode))
        self.start_step = -1 if start_step == "*" else int(start_step)
        self.start_phase = StepPhase(start_phase)
        self.start_time_since_epoch_in_micros = float(start_time)

        self.end_mode = PythonProfileModes(str_to_python_profile_mode(end_mode))
        self.end_step = float("inf") if end_step == "*" else int(end_step)
        self.end_phase = StepPhase(end_phase)
        self.end_time_since_epoch_in_micros = float(end_time)

        self.stats_path = stats_path

    def has_start_and_end_mode(self, start_mode, end_mode) -> bool:
        return self.start_mode == start_mode and self.end_mode == end_mode

    def in_time_interval(self, start_us: float, end_us: float) -> bool:
        return (
            start_us <= self.start_time_since_epoch_in_micros <= end_us
            or start_us <= self.end_time_since_epoch_in_micros <= end_us
        )

    def in_step_interval(self, start_step, end_step, start_phase, end_phase) -> bool:
        if start_step < self.start_step and end_step > self.end_step:
            return True
        elif start_step > self.start_step or end_step < self.end_step:
            return False
        else:
            if (
                start_step == self.start_step
                and start_phase in (StepPhase.STEP_END, StepPhase.FORWARD_PASS_END)
                and self.start_phase != start_phase
            ):
                return False
            if end_step == self.end_step and end_phase == StepPhase.STEP_START and self.end_phase != end_phase:
                return False
            return True

    def has_pre_step_zero_profile_stats(self) -> bool:
        return self.start_phase == StepPhase.START

    def has_post_hook_close_profile_stats(self) -> bool:
        return self.end_phase == StepPhase.END

    def has_node_id(self, node_id: str) -> bool:
        return self.node_id == node_id

    def __repr__(self) -> str:
        return repr(self.__dict__)


class cProfileFunctionStats:
    def __init__(self, key, value) -> None:
        self.function_name = pstats.func_std_string(key)
        self.prim_calls, self.total_calls, self.total_time, self.cumulative_time, callers = value
        self.callers = [pstats.func_std_string(k) for k in callers.keys()]


class cProfileStats:
    def __init__(self, ps: pstats.Stats) -> None:
        self.ps = ps
        self.function_stats_list = [cProfileFunctionStats(k, v) for k, v in ps.stats.items()]


def load_python_profile_stats(profile_dir: str) -> list[StepPythonProfileStats]:
    """LocalPythonStatsReader.load_python_profile_stats: list node and stats folders, parse names, sort."""
    out = []
    framework = os.path.basename(os.path.dirname(profile_dir))
    for node_id in os.listdir(profile_dir):
        node_dir_path = os.path.join(profile_dir, node_id)
        for stats_dir in os.listdir(node_dir_path):
            stats_dir_path = os.path.join(node_dir_path, stats_dir)
            for filename in os.listdir(stats_dir_path):
                if filename == CPROFILE_STATS_FILENAME:
                    profiler_name = "cprofile"
                elif filename in (PYINSTRUMENT_JSON_FILENAME, PYINSTRUMENT_HTML_FILENAME):
                    profiler_name = "pyinstrument"
                else:
                    continue
                out.append(
                    StepPythonProfileStats(framework, profiler_name, node_id, stats_dir, os.path.join(stats_dir_path, filename))
                )
    out.sort(key=lambda x: (x.start_time_since_epoch_in_micros, x.node_id))
    return out


class SmdebugCProfileAnalysis:
    """smdebug 1.0.34's cProfileAnalysis over a local profiler folder (``.../framework/{fw}/cprofile``)."""

    def __init__(self, local_profile_dir: str) -> None:
        assert os.path.isdir(local_profile_dir), "The provided stats directory does not exist!"
        self.profile_dir = str(local_profile_dir)
        self._refresh(True)

    def _refresh(self, refresh_stats: bool) -> None:
        if refresh_stats:
            self.python_profile_stats = load_python_profile_stats(self.profile_dir)
        # smdebug filters on every call, refresh or not.
        self.python_profile_stats = list(filter(lambda x: x.profiler_name == "cprofile", self.python_profile_stats))

    def _by_node(self, node_id: str | None) -> list[StepPythonProfileStats]:
        if not self.python_profile_stats:
            return []
        if node_id is None:  # not smdebug: every node
            return list(self.python_profile_stats)
        if node_id == "any":
            node_id = self.python_profile_stats[0].node_id
        return [s for s in self.python_profile_stats if s.node_id == node_id]

    @staticmethod
    def _aggregate(stats: list[StepPythonProfileStats]) -> cProfileStats | None:
        ps = pstats.Stats()
        if not stats:
            return None  # smdebug prints "No stats were found for the requested interval!"
        for s in stats:
            ps.add(s.stats_path)
        return cProfileStats(ps)

    # -- fetch methods ----------------------------------------------------------------------------------
    def fetch_profile_stats_by_step(
        self, start_step, end_step=None, mode=PythonProfileModes.TRAIN, start_phase=StepPhase.STEP_START,
        end_phase=StepPhase.STEP_END, node_id="any", refresh_stats=True,
    ):
        self._refresh(refresh_stats)
        if end_step is None:
            end_step = start_step
        mode, start_phase, end_phase = _mode(mode), _phase(start_phase), _phase(end_phase)
        return self._aggregate(
            [
                s
                for s in self._by_node(node_id)
                if s.in_step_interval(start_step, end_step, start_phase, end_phase) and s.has_start_and_end_mode(mode, mode)
            ]
        )

    def fetch_profile_stats_by_time(self, start_s, end_s, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        start_us, end_us = start_s * 1000000, end_s * 1000000
        return self._aggregate([s for s in self._by_node(node_id) if s.in_time_interval(start_us, end_us)])

    def fetch_profile_stats_between_modes(self, start_mode, end_mode, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        start_mode, end_mode = _mode(start_mode), _mode(end_mode)
        return self._aggregate([s for s in self._by_node(node_id) if s.has_start_and_end_mode(start_mode, end_mode)])

    def fetch_pre_step_zero_profile_stats(self, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        return self._aggregate([s for s in self._by_node(node_id) if s.has_pre_step_zero_profile_stats()])

    def fetch_post_hook_close_profile_stats(self, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        return self._aggregate([s for s in self._by_node(node_id) if s.has_post_hook_close_profile_stats()])

    def fetch_profile_stats_by_training_phase(self, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        out = {}
        for start_mode in PythonProfileModes:
            for end_mode in PythonProfileModes:
                stats = self.fetch_profile_stats_between_modes(start_mode, end_mode, node_id=node_id, refresh_stats=False)
                if stats is not None:
                    out[(start_mode, end_mode)] = stats
        return out

    def fetch_profile_stats_by_job_phase(self, node_id="any", refresh_stats=True):
        self._refresh(refresh_stats)
        phases = self.fetch_profile_stats_by_training_phase(node_id=node_id, refresh_stats=False)
        out = {}
        ps = pstats.Stats()
        for (start_mode, end_mode), stats in phases.items():
            if start_mode == PythonProfileModes.PRE_STEP_ZERO:
                out["initialization"] = stats
            elif end_mode == PythonProfileModes.POST_HOOK_CLOSE:
                out["finalization"] = stats
            else:
                ps.add(stats.ps)
        out["training_loop"] = cProfileStats(ps)
        return out

    def list_profile_stats(self, refresh_stats=True):
        """smdebug returns a DataFrame of every entry's attributes, modes mapped to their strings."""
        self._refresh(refresh_stats)
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas is a test dependency
            return [vars(s) for s in self.python_profile_stats]
        if not self.python_profile_stats:
            print("No stats were found!")
            return pd.DataFrame()
        df = pd.DataFrame([vars(s) for s in self.python_profile_stats])
        df["start_mode"] = df["start_mode"].map(python_profile_mode_to_str)
        df["end_mode"] = df["end_mode"].map(python_profile_mode_to_str)
        return df

    def list_available_node_ids(self, refresh_stats=True):
        self._refresh(refresh_stats)
        return sorted({s.node_id for s in self.python_profile_stats})


# -- the decode floor -------------------------------------------------------------------------------------
def stats_files(job_dir: str | Path) -> tuple[list[str], list[str]]:
    """Every cProfile file and pyinstrument JSON below a job folder, in a stable order."""
    cprofile, pyinstrument = [], []
    for dirpath, dirnames, filenames in os.walk(job_dir):
        dirnames.sort()
        for name in filenames:
            if name == CPROFILE_STATS_FILENAME:
                cprofile.append(os.path.join(dirpath, name))
            elif name == PYINSTRUMENT_JSON_FILENAME:
                pyinstrument.append(os.path.join(dirpath, name))
    return cprofile, pyinstrument


def decode_floor(cprofile_paths: list[str], pyinstrument_paths: list[str]) -> dict:
    """Read every file and decode it, one after the other in this process; nothing is kept."""
    started = time.perf_counter()
    cprofile_bytes = 0
    for path in cprofile_paths:
        with open(path, "rb") as f:
            data = f.read()
        cprofile_bytes += len(data)
        marshal.loads(data)
    middle = time.perf_counter()
    pyinstrument_bytes = 0
    for path in pyinstrument_paths:
        with open(path, "rb") as f:
            data = f.read()
        pyinstrument_bytes += len(data)
        json.loads(data)
    ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "cprofile_seconds": middle - started,
        "pyinstrument_seconds": ended - middle,
        "cprofile_files": len(cprofile_paths),
        "pyinstrument_files": len(pyinstrument_paths),
        "cprofile_bytes": cprofile_bytes,
        "pyinstrument_bytes": pyinstrument_bytes,
    }


def parquet_floor(cprofile_paths: list[str], pyinstrument_paths: list[str], out_dir: str | Path,
                  segment_rows: int = 150_000) -> dict:
    """Read every file, parse it with proflake's readers (the compiled cProfile decoder when it is built)
    and write the rows to Parquet files with the store's writer settings, in segments of about
    ``segment_rows`` rows as the parse workers do: one process, one thread, no interval keys, listing,
    partial sums, intervals or commit. The least an ingest into this store does; the files are removed."""
    import shutil

    import pyarrow as pa
    from proflake.readers.parse import parse_stats
    from proflake.store.deltawrite import parquet_options, write_data_file
    from proflake.store.store import writer_properties

    options = parquet_options(writer_properties())
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    segment: dict[str, list] = {}
    held = 0
    written = 0

    def write() -> None:
        nonlocal held, written
        for name, tables in segment.items():
            written += write_data_file(name, pa.concat_tables(tables), str(out_dir), "floor", options).size
        segment.clear()
        held = 0

    started = time.perf_counter()
    for profiler, paths in (("cprofile", cprofile_paths), ("pyinstrument", pyinstrument_paths)):
        for path in paths:
            with open(path, "rb") as f:
                facts = parse_stats(profiler, f.read()).facts
            for name, table in facts.items():
                segment.setdefault(name, []).append(table)
                held += table.num_rows
            if held >= segment_rows:
                write()
    write()
    seconds = time.perf_counter() - started
    shutil.rmtree(out_dir)
    return {"seconds": seconds, "bytes_written": written}
