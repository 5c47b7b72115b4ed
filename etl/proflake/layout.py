"""Map a stats file's path to the interval it describes.

Three namings exist in the wild:

* smdebug (current):
  ``{base}/framework/{framework}/{profiler}/{node_id}/{start_mode}-{start_step}-{start_phase}-{start_us}_{end_mode}-{end_step}-{end_phase}-{end_us}/{file}``
* smdebug-legacy (TensorFlow jobs before modes and phases existed):
  ``{base}/framework/{framework}/cProfile/{start_us}_{end_us}_{node_id}_{step}/python_stats``

* plain (files outside smdebug's layout, ``proflake ingest FILE --job J --node N``): no path naming at
  all; proflake.sources.plain plans each file's interval and :func:`plain_interval` files it. (Stores
  written before the layout existed hold such files as layout ``smdebug``, framework ``plain``: their
  rows read as they were written.)

* smdebug-folder (a profiler folder outside ``framework/``, read as smdebug's readers read
  ``local_profile_dir``): ``{anything}/{folder}/{node_id}/{current interval naming}/{file}``, e.g. the
  ``{local_profile_dir}/python_stats/`` smdebug downloads S3 jobs into, or ``aws s3 sync
  .../framework/pytorch/cprofile ./cprofile``. Only an interval folder that fully matches the current
  naming, with known modes and phases, makes a file count; the profiler comes from the file name and
  the framework is the folder's parent's name, as smdebug takes it (``unknown`` at the top of a path).

Legacy intervals carry no mode or phase. Step -1 was smdebug's label for "before step 0", which is
what the current naming writes as ``prestepzero-*-start`` ending at ``train-0-stepstart``; any other
step N was one training step, i.e. ``train-N-stepstart`` to ``train-N-stepend``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proflake.errors import LayoutError
from proflake.modes import MODE_LABELS, PHASE_LABELS

CPROFILE_FILE = "python_stats"
PYINSTRUMENT_JSON_FILE = "python_stats.json"
PYINSTRUMENT_HTML_FILE = "python_stats.html"
STATS_FILES = (CPROFILE_FILE, PYINSTRUMENT_JSON_FILE, PYINSTRUMENT_HTML_FILE)

_TIME = r"\d+(?:\.\d+)?"
_BOUNDARY = rf"(?P<{{p}}mode>[a-z]+)-(?P<{{p}}step>\*|-?\d+)-(?P<{{p}}phase>[a-z]+)-(?P<{{p}}time>{_TIME})"
_CURRENT_DIR = re.compile(
    "^" + _BOUNDARY.format(p="start_") + "_" + _BOUNDARY.format(p="end_") + "$"
)
_LEGACY_DIR = re.compile(rf"^(?P<start_time>{_TIME})_(?P<end_time>{_TIME})_(?P<node>.+)_(?P<step>-?\d+)$")


@dataclass(frozen=True, slots=True)  # one per listed stats file: a large job lists 100,000s
class IntervalPath:
    """What a stats file's path says about its interval; the reader adds what the contents say."""

    base: tuple[str, ...]  # path components above framework/
    framework: str
    profiler: str  # cprofile | pyinstrument
    node_id: str
    start_mode: str
    start_step: int  # -1 for '*'
    start_phase: str
    start_time_us: float
    end_mode: str
    end_step: int | None  # None for '*'
    end_phase: str
    end_time_us: float
    layout: str  # smdebug | smdebug-legacy | smdebug-folder | plain
    file_name: str
    source_format: str = ""  # the format the parse workers are told (proflake.formats.task_format); "": the profiler's

    @property
    def task_format(self) -> str:
        return self.source_format or self.profiler

    @property
    def job_phase(self) -> str:
        return job_phase(self.start_phase, self.end_phase)



def job_phase(start_phase: str, end_phase: str) -> str:
    """smdebug's job phases, with its two bugs fixed: a whole-job interval gets its own phase, and the
    post-hook-close interval (start mode prestepzero, start phase end) is finalization."""
    starts_at_start = start_phase == "start"
    ends_at_end = end_phase == "end"
    if starts_at_start and ends_at_end:
        return "whole_job"
    if starts_at_start:
        return "initialization"
    if ends_at_end:
        return "finalization"
    return "training_loop"


def is_stats_file(name: str) -> bool:
    return name in STATS_FILES


def is_interval_folder(name: str) -> bool:
    """Whether a folder name is smdebug's current interval naming (``train-1-stepstart-..._...``)."""
    return _CURRENT_DIR.match(name) is not None


def parse_stats_path(parts: tuple[str, ...] | list[str]) -> IntervalPath | None:
    """Interpret a stats file's path, given as its components (local path parts or S3 key parts).

    Returns None when the path is not a stats file in either layout (some other file under the
    source); raises LayoutError when it is clearly meant to be one but its names are wrong, so the
    file is reported rather than silently skipped.
    """
    parts = tuple(parts)
    if not parts or parts[-1] not in STATS_FILES:
        return None
    file_name = parts[-1]
    if len(parts) >= 6 and parts[-6] == "framework" and _looks_current(parts[-2]):
        return _parse_current(parts, file_name)
    if len(parts) >= 5 and parts[-5] == "framework":
        return _parse_legacy(parts, file_name)
    if len(parts) >= 6 and parts[-6] == "framework":
        return _parse_current(parts, file_name)
    if len(parts) >= 4 and _CURRENT_DIR.match(parts[-2]):
        try:
            return _parse_current(parts, file_name, folder=True)
        except LayoutError:
            return None  # outside framework/, only a well-formed interval folder says "stats file"
    return None


def _looks_current(dir_name: str) -> bool:
    return "-" in dir_name.split("_", 1)[0] and not _LEGACY_DIR.match(dir_name)


def _profiler_for(file_name: str) -> str:
    return "cprofile" if file_name == CPROFILE_FILE else "pyinstrument"


# What the store can hold: steps are int64, times are microseconds up to the last date Python knows.
_STEP_RANGE = (-(2**63), 2**63 - 1)
_MAX_TIME_US = 253_402_300_799_999_999.0  # 9999-12-31T23:59:59.999999Z


def _step(text: str, star: int | None, dir_name: str = "") -> int | None:
    if text == "*":
        return star
    step = int(text)
    if not _STEP_RANGE[0] <= step <= _STEP_RANGE[1]:
        raise LayoutError(f"stats directory {dir_name!r} names step {text}, outside the 64-bit range a step can hold")
    return step


def _times(start: str, end: str, dir_name: str) -> tuple[float, float]:
    """The interval's start and end in microseconds, checked: a date, and not ending before it starts."""
    start_time_us, end_time_us = float(start), float(end)
    for value, text in ((start_time_us, start), (end_time_us, end)):
        if not 0 <= value <= _MAX_TIME_US:
            raise LayoutError(f"stats directory {dir_name!r} names time {text} us, which is no date (after year 9999)")
    if end_time_us < start_time_us:
        raise LayoutError(f"stats directory {dir_name!r} ends before it starts")
    return start_time_us, end_time_us


_BASES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _shared(base: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple per job folder, not one per listed file (a 100,000-file job lists one base 100,000 times)."""
    if len(_BASES) > 10_000:
        _BASES.clear()
    return _BASES.setdefault(base, base)


def _check_name(kind: str, value: str, valid: tuple[str, ...], dir_name: str) -> str:
    if value not in valid:
        raise LayoutError(
            f"stats directory {dir_name!r} names unknown {kind} {value!r}; expected one of: {', '.join(valid)}"
        )
    return valid[valid.index(value)]  # the shared constant, not one more copy per listed file


def _parse_current(parts: tuple[str, ...], file_name: str, folder: bool = False) -> IntervalPath:
    framework = (parts[-5] if len(parts) >= 5 else "") or "unknown"
    profiler_dir, node_id, dir_name = parts[-4], parts[-3], parts[-2]
    match = _CURRENT_DIR.match(dir_name)
    if match is None:
        raise LayoutError(
            f"stats directory {dir_name!r} does not follow smdebug's naming "
            "{start_mode}-{start_step}-{start_phase}-{start_time_us}_{end_mode}-{end_step}-{end_phase}-{end_time_us}"
        )
    g = match.groupdict()
    start_time_us, end_time_us = _times(g["start_time"], g["end_time"], dir_name)
    profiler = _profiler_for(file_name)
    if not folder and (profiler_dir.lower() not in ("cprofile", "pyinstrument") or profiler_dir.lower() != profiler):
        raise LayoutError(
            f"{file_name} is in profiler folder {profiler_dir!r}; smdebug writes it under {profiler!r}"
        )
    return IntervalPath(
        base=_shared(parts[:-4] if folder else parts[:-6]),
        framework=framework,
        profiler=profiler,
        node_id=node_id,
        start_mode=_check_name("mode", g["start_mode"], MODE_LABELS, dir_name),
        start_step=_step(g["start_step"], -1, dir_name),  # type: ignore[arg-type]
        start_phase=_check_name("phase", g["start_phase"], PHASE_LABELS, dir_name),
        start_time_us=start_time_us,
        end_mode=_check_name("mode", g["end_mode"], MODE_LABELS, dir_name),
        end_step=_step(g["end_step"], None, dir_name),
        end_phase=_check_name("phase", g["end_phase"], PHASE_LABELS, dir_name),
        end_time_us=end_time_us,
        layout="smdebug-folder" if folder else "smdebug",
        file_name=file_name,
    )


def _parse_legacy(parts: tuple[str, ...], file_name: str) -> IntervalPath:
    framework, profiler_dir, dir_name = parts[-4], parts[-3], parts[-2]
    match = _LEGACY_DIR.match(dir_name)
    if match is None or file_name != CPROFILE_FILE or profiler_dir.lower() != "cprofile":
        raise LayoutError(
            f"stats directory {dir_name!r} under framework/{framework}/{profiler_dir} follows neither smdebug "
            "naming: expected {node_id}/{start_mode}-{start_step}-{start_phase}-{start_us}_... or the legacy "
            "cProfile/{start_us}_{end_us}_{node_id}_{step}"
        )
    start_time_us, end_time_us = _times(match["start_time"], match["end_time"], dir_name)
    step = _step(match["step"], None, dir_name)
    assert step is not None
    if step == -1:
        start, end = ("prestepzero", -1, "start"), ("train", 0, "stepstart")
    else:
        start, end = ("train", step, "stepstart"), ("train", step, "stepend")
    return IntervalPath(
        base=_shared(parts[:-5]),
        framework=framework,
        profiler="cprofile",
        node_id=match["node"],
        start_mode=start[0],
        start_step=start[1],  # type: ignore[arg-type]
        start_phase=start[2],  # type: ignore[arg-type]
        start_time_us=start_time_us,
        end_mode=end[0],  # type: ignore[arg-type]
        end_step=end[1],  # type: ignore[arg-type]
        end_phase=end[2],  # type: ignore[arg-type]
        end_time_us=end_time_us,
        layout="smdebug-legacy",
        file_name=file_name,
    )


def plain_interval(
    base: tuple[str, ...], profiler: str, node_id: str, mode: str, step: int, start_time_us: float, end_time_us: float,
    file_name: str, task_format: str,
) -> IntervalPath:
    """The interval of a file outside smdebug's layout: one step, ``{mode}-{step}-stepstart`` to
    ``{mode}-{step}-stepend``, as smdebug would have named it (proflake.sources.plain plans the values)."""
    _times(repr(start_time_us), repr(end_time_us), file_name)
    checked_step = _step(str(step), None, file_name)
    assert checked_step is not None
    mode = _check_name("mode", mode, MODE_LABELS, file_name)
    return IntervalPath(
        base=base, framework="plain", profiler=profiler, node_id=node_id,
        start_mode=mode, start_step=checked_step, start_phase="stepstart", start_time_us=start_time_us,
        end_mode=mode, end_step=checked_step, end_phase="stepend", end_time_us=end_time_us,
        layout="plain", file_name=file_name, source_format=task_format,
    )
