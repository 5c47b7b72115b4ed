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
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since Python 2.6, untyped
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


# pyinstrument's JSONRenderer writes start_time and duration before root_frame: the first 64 KB hold them.
_HEAD_BYTES = 64 * 1024
_SESSION_FIELDS = ("start_time", "duration")


def _pyinstrument_session(path: Path) -> tuple[float, float] | None:
    """(start_time, duration) in seconds from a pyinstrument JSON, or None if it has no usable ones.

    Only the top-level fields are read, never the call tree: a recursion 5,000 frames deep is 10,000
    nesting levels, past what ``json.load`` can decode (RecursionError). The file's head is read first;
    the rest only when the fields come after root_frame (a file re-written with sorted keys). A file this
    cannot read gets no session times; the reader then ingests it or says what is wrong with it."""
    try:
        with open(path, "rb") as f:
            data = f.read(_HEAD_BYTES)
            fields = _top_level_fields(data, _SESSION_FIELDS)
            if fields is None and len(data) == _HEAD_BYTES:
                data += f.read()
                fields = _top_level_fields(data, _SESSION_FIELDS, whole=True)
    except OSError:
        return None
    if fields is None:
        return None
    start, duration = _seconds(fields["start_time"]), _seconds(fields["duration"])
    return None if start is None or duration is None else (start, duration)


def _seconds(value: object) -> float | None:
    """A finite, non-negative number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _top_level_fields(data: bytes, names: tuple[str, ...], *, whole: bool = False) -> dict[str, object] | None:
    """The scalar values of the top-level fields ``names`` of the JSON object in ``data`` (all of them,
    or None: not found, not JSON, or ``data`` ends first). Nested values are skipped with a bracket
    counter, not decoded: no recursion and no tree in memory, however deep the document. ``whole``: the
    file's full text, tried with the C decoder first (fast when it is not deep)."""
    try:
        text = data.decode("utf-8")
        if whole:
            try:
                doc = json.loads(text)
            except RecursionError:
                pass
            else:
                if type(doc) is not dict or not all(name in doc for name in names):
                    return None
                return {name: doc[name] for name in names}
        return _scan_top_level(text, names)
    except (ValueError, IndexError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


_WS = re.compile(r"[ \t\n\r]*")
_BRACKET_OR_QUOTE = re.compile(r'["{}\[\]]')
_SCALAR_END = re.compile(r"[,}\] \t\n\r]")


def _scan_top_level(text: str, names: tuple[str, ...]) -> dict[str, object] | None:
    found: dict[str, object] = {}
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    if not text.startswith("{", pos):
        return None
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    while pos < len(text) and text[pos] == '"':
        key, pos = scanstring(text, pos + 1)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        end = _skip_value(text, pos)
        if key in names and text[pos] not in '{["':
            found[key] = json.loads(text[pos:end])
            if len(found) == len(names):
                return found
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
        if not text.startswith(",", pos):
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    return None


def _skip_value(text: str, pos: int) -> int:
    """Where the JSON value starting at ``pos`` ends (it is not checked, only delimited)."""
    first = text[pos]
    if first == '"':
        return int(scanstring(text, pos + 1)[1])
    if first not in "{[":
        match = _SCALAR_END.search(text, pos)
        if match is None:
            raise ValueError("the text ends inside a value")
        return match.start()
    depth = 0
    while True:
        match = _BRACKET_OR_QUOTE.search(text, pos)
        if match is None:
            raise ValueError("the text ends inside a value")
        pos = match.end()
        mark = match.group()
        if mark == '"':
            pos = int(scanstring(text, pos)[1])
        elif mark in "{[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos
