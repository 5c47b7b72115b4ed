"""Would an ingest of this source find anything new? Answered by listing it, nothing more.

The smdebug-compatible classes refresh before every answer (smdebug's ``refresh_stats=True`` re-lists
its folder each call). A full incremental ingest that finds nothing still takes the store's lock,
reads its bookkeeping, records a batch and checks the roll-ups; this probe only lists the source and
compares each stats file's size and version with what the caller already holds (the intervals its
view of the store answers from, plus the files it knows to be quarantined). When it says "unchanged",
an ingest would have added nothing, so the caller skips it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from proflake.errors import LayoutError, SourceError
from proflake.layout import CPROFILE_FILE, PYINSTRUMENT_JSON_FILE, parse_stats_path
from proflake.sources.base import Source, SourceObject
from proflake.sources.local import LocalSource, unlistable_root

_NAMES = frozenset((CPROFILE_FILE, PYINSTRUMENT_JSON_FILE))

Known = Mapping[str, tuple[int, str]]  # source_uri -> (size, version)


@dataclass
class Probe:
    """What one listing found: the stats files not in ``known`` at their listed size and version."""

    files_seen: int = 0
    new: list[str] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        return not self.new


def probe(src: Source, known: Known, *, stop_at_first: bool = True) -> Probe:
    """List ``src`` and name the stats files an ingest would read (new or changed); with
    ``stop_at_first`` the listing ends at the first one, since one is enough to need the ingest.

    A pyinstrument html is not compared: an ingest reads it only with its json, and never for an
    unchanged json. Files that fit no layout are ignored, as the ingest ignores them; a file whose
    name is a stats file's but whose folder is misnamed counts as new unless ``known`` holds it (the
    ingest quarantines it again, each run)."""
    found = Probe()
    listing = _local_stats_files(src, found) if isinstance(src, LocalSource) else src.list()
    for obj in listing:
        found.files_seen += 1
        name = obj.parts[-1]
        if name not in _NAMES:
            continue
        if known.get(obj.uri) == (obj.size, obj.version):
            continue
        if not obj.problem:
            try:
                if parse_stats_path(obj.parts) is None:
                    continue
            except LayoutError:
                pass
        found.new.append(obj.uri)
        if stop_at_first:
            break
    return found


def _local_stats_files(src: LocalSource, found: Probe) -> Iterator[SourceObject]:
    """``src.list()`` narrowed to the files named as stats files, as the same SourceObjects (uri, parts,
    size, version, a symbolic link's problem), in no particular order: the walk builds no object for
    any other file. ``found.files_seen`` counts those other files."""
    root = str(src.root)
    stack = [(root, src.root_parts)]
    while stack:
        folder, parts = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except FileNotFoundError:
            if folder == root:
                raise SourceError(f"source folder {folder!r} vanished while it was listed") from None
            continue  # deleted while walked: the ingest, if one runs, reports it
        except OSError as error:
            if folder == root:
                raise SourceError(unlistable_root(folder, error)) from error
            continue  # a folder that cannot be listed: the ingest, if one runs, quarantines it
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, (*parts, entry.name)))
                    continue
                link = entry.is_symlink()
                if link and entry.is_dir():
                    continue  # a link to a folder: never walked into, as LocalSource.list
                if entry.name not in _NAMES:
                    found.files_seen += 1  # (a socket or pipe too, which LocalSource.list leaves out)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished between listing and stat
            if link or stat.S_ISREG(st.st_mode):
                problem = "is a symbolic link; links are not followed" if link else None
                yield SourceObject(entry.path, (*parts, entry.name), st.st_size, str(st.st_mtime_ns), problem)
