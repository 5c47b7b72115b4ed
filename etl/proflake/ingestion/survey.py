"""Before an ingest: does the source hold any stats file at all? If not, say what it holds instead.

An ingest that finds nothing to read is almost always a mistake (source and store swapped, a wrong
folder, raw ``.prof`` files): it fails with one sentence, unless the caller allows an empty source (a
nightly run over a prefix that may be empty). The survey stops at the first stats file it lists, which
for smdebug's layout is among the first objects, so a normal ingest pays almost nothing for it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import PurePosixPath

from proflake.errors import SourceError
from proflake.layout import CPROFILE_FILE, PYINSTRUMENT_JSON_FILE
from proflake.sources.base import Source

_PLAIN_SUFFIXES = (".prof", ".pstats", ".cprof", ".json")


class EmptySourceError(SourceError):
    """The source holds no stats file at all."""


def require_stats_files(src: Source) -> None:
    """Return at the first stats file ``src`` lists; raise EmptySourceError naming what it found if none."""
    planned = getattr(src, "files", None)  # plain files (sources.plain): the files it planned
    if planned is not None:
        if planned:
            return
        raise EmptySourceError(
            f"no .prof, .pstats or .json file, nor any other format proflake reads, in {src.uri!r}; pass a "
            "profile file or the folder holding them (docs/formats.md; --allow-empty accepts an empty source)"
        )
    suffixes: Counter[str] = Counter()
    files = 0
    store_like = False
    for obj in src.list():
        name = obj.parts[-1] if obj.parts else obj.uri.rsplit("/", 1)[-1]
        if name in (CPROFILE_FILE, PYINSTRUMENT_JSON_FILE):
            return
        files += 1
        suffixes[PurePosixPath(name).suffix or "(no suffix)"] += 1
        store_like = store_like or "_delta_log" in obj.parts
    looked = "found no python_stats or python_stats.json file (smdebug's layout)"
    if files == 0:
        found = "it is empty"
    else:
        common = sorted(suffixes.items(), key=lambda item: (-item[1], item[0]))[:4]
        kinds = ", ".join(f"{n} {suffix}" for suffix, n in common)
        found = f"it holds {files} other file(s) ({kinds}{', ...' if len(suffixes) > 4 else ''})"
    if store_like:
        hint = "it looks like a proflake store: did you swap SOURCE and --store?"
    elif any(suffix in _PLAIN_SUFFIXES for suffix in suffixes):
        hint = "for cProfile or pyinstrument files outside smdebug's layout, pass --job J --node N"
    else:
        hint = "check the path"
    raise EmptySourceError(
        f"nothing to ingest under {src.uri!r}: {looked}; {found}; {hint} (--allow-empty accepts an empty source)"
    )
