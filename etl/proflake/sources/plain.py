"""Stats files outside smdebug's layout: a ``.prof``/``.pstats`` from cProfile, a pyinstrument JSON.

``proflake ingest FILE_OR_FOLDER --job J --node N [--step S --mode M]``. The files carry no interval in
their path, so this source gives each profiler's files, in path order, the intervals smdebug would have
written for steps S, S+1, ... of mode M (``{M}-{S}-stepstart-{start}_{M}-{S}-stepend-{end}``), and lists it under
that smdebug path (framework ``plain``); the batch ingests it like any other, reading the real file.

Times: a pyinstrument file holds its session's ``start_time`` and ``duration``, which are used. A
cProfile file holds no time at all: its interval starts and ends at the file's modification time.
``PlainFile.time_source`` says which, for the CLI to tell the user.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from proflake.errors import SourceError, UsageError
from proflake.modes import mode_label
from proflake.sources.base import SourceObject

# smdebug's file names (proflake.layout's, which sources may not import: they share a layer).
CPROFILE_FILE = "python_stats"
PYINSTRUMENT_JSON_FILE = "python_stats.json"

CPROFILE_SUFFIXES = (".prof", ".pstats", ".cprof")
PYINSTRUMENT_SUFFIXES = (".json",)
FRAMEWORK = "plain"


@dataclass(frozen=True)
class PlainFile:
    """One file and the interval given to it."""

    path: str
    profiler: str  # cprofile | pyinstrument
    step: int
    start_time_us: float
    end_time_us: float
    time_source: str  # "pyinstrument session" | "modification time"


class PlainFilesSource:
    """A stats file, or the stats files of a folder (recursively, by suffix), as one node's steps."""

    def __init__(self, location: str, *, node_id: str, step: int = 0, mode: str = "train") -> None:
        path = Path(location).expanduser()
        if "://" in location:
            raise UsageError("--node ingests local files only; copy the files to a folder first")
        if not path.exists():
            raise SourceError(f"source {location!r} does not exist; check the path")
        if not node_id or "/" in node_id:
            raise UsageError(f"--node {node_id!r} is not a node id")
        self.root = path.resolve()
        self.uri = str(self.root)
        self.node_id = node_id
        self.mode = mode_label(mode)
        self.files = self._plan(step)

    @property
    def root_parts(self) -> tuple[str, ...]:
        return self.root.parts if self.root.is_dir() else self.root.parent.parts

    def _candidates(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        found = []
        for folder, subfolders, names in os.walk(self.root):
            subfolders.sort()
            for name in sorted(names):
                if name.endswith(CPROFILE_SUFFIXES + PYINSTRUMENT_SUFFIXES):
                    found.append(Path(folder) / name)
        return found

    def _plan(self, first_step: int) -> list[PlainFile]:
        planned = []
        counts = {"cprofile": 0, "pyinstrument": 0}
        for path in self._candidates():
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError as e:
                raise SourceError(f"cannot read {str(path)!r}: {e.strerror}") from e
            if not stat.S_ISREG(info.st_mode):
                continue
            profiler = "pyinstrument" if path.name.endswith(PYINSTRUMENT_SUFFIXES) else "cprofile"
            mtime_us = info.st_mtime_ns / 1000
            start, end, source = mtime_us, mtime_us, "modification time"
            if profiler == "pyinstrument":
                session = _pyinstrument_session(path)
                if session is not None:
                    start, end, source = session[0] * 1e6, (session[0] + session[1]) * 1e6, "pyinstrument session"
            planned.append(PlainFile(str(path), profiler, first_step + counts[profiler], start, end, source))
            counts[profiler] += 1
        return planned

    def list(self) -> Iterator[SourceObject]:
        for file in self.files:
            info = os.stat(file.path, follow_symlinks=False)
            name = PYINSTRUMENT_JSON_FILE if file.profiler == "pyinstrument" else CPROFILE_FILE
            interval = (
                f"{self.mode}-{file.step}-stepstart-{_time(file.start_time_us)}_"
                f"{self.mode}-{file.step}-stepend-{_time(file.end_time_us)}"
            )
            parts = (*self.root_parts, "framework", FRAMEWORK, file.profiler, self.node_id, interval, name)
            yield SourceObject(uri=file.path, parts=parts, size=info.st_size, version=str(info.st_mtime_ns))

    def read(self, obj: SourceObject) -> bytes:
        try:
            fd = os.open(obj.uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()
        except OSError as e:
            raise SourceError(f"cannot read {obj.uri!r}: {e.strerror}") from e


def _time(us: float) -> str:
    return f"{us:.1f}" if us != int(us) else str(int(us))


def _pyinstrument_session(path: Path) -> tuple[float, float] | None:
    """(start_time, duration) in seconds from a pyinstrument JSON, or None if it has no usable ones."""
    try:
        with open(path, "rb") as f:
            data = json.load(f)
        start, duration = data["start_time"], data["duration"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # the reader will say what is wrong with the file
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, duration)):
        return None
    if not (math.isfinite(start) and math.isfinite(duration)) or start < 0 or duration < 0:
        return None
    return float(start), float(duration)
