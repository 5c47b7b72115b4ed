"""Would an ingest of this source find anything new? Answered by listing it, nothing more.

The smdebug-compatible classes refresh before every answer (smdebug's ``refresh_stats=True`` re-lists
its folder each call). A full incremental ingest that finds nothing still takes the store's lock,
reads its bookkeeping, records a batch and checks the roll-ups; this probe only lists the source and
compares each stats file's size and version with what the caller already holds (the intervals its
view of the store answers from, plus the files it knows to be quarantined). When it says "unchanged",
an ingest would have added nothing, so the caller skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from proflake.errors import LayoutError
from proflake.layout import CPROFILE_FILE, PYINSTRUMENT_JSON_FILE, parse_stats_path
from proflake.sources.base import Source

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
    for obj in src.list():
        found.files_seen += 1
        name = obj.parts[-1]
        if name != CPROFILE_FILE and name != PYINSTRUMENT_JSON_FILE:
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
