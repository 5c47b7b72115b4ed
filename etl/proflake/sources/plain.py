"""Profile files outside smdebug's layout: any format proflake reads (docs/formats.md), one file per interval.

``proflake ingest FILE_OR_FOLDER --job J --node N [--step S --mode M] [--format F] [--sample-rate HZ]
[--pattern P]``. This source lists the files by their real paths and plans an interval for each
(``PlainFile``); the ingest files it under layout ``plain`` (proflake.layout.plain_interval), framework
``plain``, as the steps of mode M of node N:

* node: ``--node``, or the pattern's ``{node}``;
* step: the pattern's ``{step}``; without one, the number after ``step`` in the file name (``step-12``,
  ``step_12``, ``step12``) when every file's name has one; otherwise S, S+1, ... in path order, counted
  per table family (cProfile files, call-tree files);
* mode: ``--mode`` (default train), or the pattern's ``{mode}``;
* times: from the file when it carries them (a pyinstrument session's start_time and duration), or its
  duration ending at the file's modification time (a speedscope profile's endValue - startValue,
  austin's ``# duration``), else start and end at the modification time. ``PlainFile.time_source`` says
  which, for the CLI to tell the user.

A pattern is matched against the path below SOURCE (``/``-separated): ``{node}``, ``{step}`` and
``{mode}`` each match one path component's text, ``*`` any text within a component, ``**`` any folders;
a file it does not match is left out. Formats come from ``--format``, else the file's contents, else
its name (proflake.formats.sniff); a folder's files no format claims are left out, a single such file is
planned as ``unknown`` and quarantined by the ingest.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from proflake.errors import SourceError, UsageError
from proflake.formats import FORMATS, SAMPLED_STACKS, Format, by_suffix, format_named, task_format
from proflake.formats.sniff import detect_file, file_span
from proflake.modes import mode_label
from proflake.sources.base import SourceObject

UNKNOWN = "unknown"  # the task format of a file no format claims: the reader quarantines it
FRAMEWORK = "plain"
_STEP_IN_NAME = re.compile(r"step[-_.]?(-?\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class PlainFile:
    """One file and the interval given to it."""

    path: str
    format: str  # a proflake.formats name, or UNKNOWN
    profiler: str  # the table family it lands in: cprofile | pyinstrument
    node_id: str
    mode: str
    step: int
    start_time_us: float
    end_time_us: float
    time_source: str  # "pyinstrument session" | "modification time" | ...
    unit: str  # what its times are, as the CLI says it
    task_format: str  # what the parse workers are told (proflake.formats.task_format)


class PlainFilesSource:
    """A profile file, or the profile files of a folder (recursively), as the steps of one or more nodes."""

    def __init__(
        self, location: str, *, node_id: str | None, step: int = 0, mode: str = "train",
        format_name: str | None = None, sample_rate_hz: float | None = None, pattern: str | None = None,
    ) -> None:
        path = Path(location).expanduser()
        if "://" in location:
            raise UsageError("--node ingests local files only; copy the files to a folder first")
        if not path.exists():
            raise SourceError(f"source {location!r} does not exist; check the path")
        self.pattern = _compile(pattern) if pattern else None
        if node_id is None and (self.pattern is None or "node" not in self.pattern.groupindex):
            raise UsageError("plain files need --node ID, or a --pattern with {node}")
        if node_id is not None and (not node_id or "/" in node_id):
            raise UsageError(f"--node {node_id!r} is not a node id")
        if sample_rate_hz is not None and not sample_rate_hz > 0:
            raise UsageError(f"--sample-rate {sample_rate_hz!r} is not a rate; give samples per second, e.g. 100")
        self.root = path.resolve()
        self.uri = str(self.root)
        self.node_id = node_id
        self.mode = mode_label(mode)
        self.forced = format_named(format_name) if format_name else None
        self.sample_rate_hz = sample_rate_hz
        self.skipped: list[str] = []  # files of the folder left out (no format, or not the pattern's)
        self.files = self._plan(step)
        self._by_uri = {f.path: f for f in self.files}

    @property
    def root_parts(self) -> tuple[str, ...]:
        return self.root.parts if self.root.is_dir() else self.root.parent.parts

    def planned(self, uri: str) -> PlainFile | None:
        """The interval planned for the listed file ``uri``."""
        return self._by_uri.get(uri)

    def _candidates(self) -> Iterator[tuple[Path, str]]:
        if self.root.is_file():
            yield self.root, self.root.name
            return
        for folder, subfolders, names in os.walk(self.root):
            subfolders.sort()
            for name in sorted(names):
                path = Path(folder) / name
                yield path, path.relative_to(self.root).as_posix()

    def _plan(self, first_step: int) -> list[PlainFile]:
        found: list[tuple[Path, Format | None, dict[str, str], os.stat_result]] = []
        single = self.root.is_file()
        for path, relative in self._candidates():
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError as e:
                raise SourceError(f"cannot read {str(path)!r}: {e.strerror}") from e
            if not stat.S_ISREG(info.st_mode):
                continue
            fields: dict[str, str] = {}
            if self.pattern is not None:
                match = self.pattern.fullmatch(relative)
                if match is None:
                    self.skipped.append(str(path))
                    continue
                fields = {k: v for k, v in match.groupdict().items() if v is not None}
            fmt = self.forced or detect_file(path)
            if fmt is None and not single:
                self.skipped.append(str(path))
                continue
            found.append((path, fmt, fields, info))
        named_steps = self.pattern is None and found and all(_STEP_IN_NAME.search(p.name) for p, *_ in found)
        counts: dict[str, int] = {}
        planned = []
        for path, fmt, fields, info in found:
            family = fmt.profiler if fmt else (by_suffix(path.name) or FORMATS["cprofile"]).profiler
            if "step" in fields:
                step = int(fields["step"])
            elif named_steps:
                step = int(_STEP_IN_NAME.findall(path.name)[-1])
            else:
                step = first_step + counts.get(family, 0)
                counts[family] = counts.get(family, 0) + 1
            mode = mode_label(fields["mode"]) if "mode" in fields else self.mode
            node = fields.get("node") or self.node_id
            assert node is not None
            planned.append(self._file(path, fmt, family, node, mode, step, info))
        return planned

    def _file(self, path: Path, fmt: Format | None, family: str, node: str, mode: str, step: int,
              info: os.stat_result) -> PlainFile:
        mtime_us = info.st_mtime_ns / 1000
        start, end, source = mtime_us, mtime_us, "modification time"
        span = file_span(path, fmt, self.sample_rate_hz) if fmt else None
        if span is not None and span.start is not None:
            start, end, source = span.start * 1e6, (span.start + span.duration) * 1e6, span.source
        elif span is not None:
            start, source = mtime_us - span.duration * 1e6, f"{span.source}, ending at its modification time"
        name = fmt.name if fmt else UNKNOWN
        rate = self.sample_rate_hz if fmt and fmt.shape == SAMPLED_STACKS else None
        return PlainFile(
            str(path), name, family, node, mode, step, start, end, source, _unit(fmt, rate),
            task_format(name, rate),
        )

    def list(self) -> Iterator[SourceObject]:
        for file in self.files:
            info = os.stat(file.path, follow_symlinks=False)
            parts = Path(file.path).parts
            yield SourceObject(uri=file.path, parts=parts, size=info.st_size, version=str(info.st_mtime_ns))

    def read(self, obj: SourceObject) -> bytes:
        try:
            fd = os.open(obj.uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()
        except OSError as e:
            raise SourceError(f"cannot read {obj.uri!r}: {e.strerror}") from e


def _unit(fmt: Format | None, rate: float | None) -> str:
    """What the file's times will be, as the CLI says it (the reader decides; this says how)."""
    if fmt is None:
        return "no format proflake reads: it will be quarantined"
    if fmt.name == "austin":
        return "seconds (austin's microseconds)"
    if fmt.shape != SAMPLED_STACKS:
        return "seconds"
    if fmt.name == "speedscope":
        return "seconds from its unit, or " + (f"samples at {rate:g} Hz (--sample-rate)" if rate else "sample counts if its unit is none")
    if rate:
        return f"seconds: samples at {rate:g} Hz (--sample-rate)"
    if fmt.default_rate_hz:
        return f"seconds: samples at {fmt.default_rate_hz:g} Hz ({fmt.name}'s default; --sample-rate to change)"
    return "sample counts (time_unit 'samples'; --sample-rate HZ for seconds)"


def _compile(pattern: str) -> re.Pattern[str]:
    """A --pattern as a regular expression over the path below the source (see the module's docstring)."""
    out, pos, seen = [], 0, set()
    for match in re.finditer(r"\{(\w+)\}|\*\*/?|\*", pattern):
        out.append(re.escape(pattern[pos:match.start()]))
        token, name = match.group(), match.group(1)
        if name is not None:
            if name not in ("node", "step", "mode") or name in seen:
                raise UsageError(f"--pattern {pattern!r} names {{{name}}}; it may name each of {{node}}, {{step}} and {{mode}} once")
            seen.add(name)
            out.append({"node": r"(?P<node>[^/]+?)", "step": r"(?P<step>-?\d+)", "mode": r"(?P<mode>[A-Za-z_]+)"}[name])
        else:
            out.append("(?:.*/)?" if token.startswith("**") and token.endswith("/") else ".*" if token.startswith("**") else "[^/]*")
        pos = match.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out))
