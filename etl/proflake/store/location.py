"""Where the store is when none is named; imports nothing heavy, so the CLI's help can show it."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STORE = "./proflake-store"


def default_store_location() -> str:
    return os.environ.get("PROFLAKE_STORE") or DEFAULT_STORE


def source_root_around(location: str) -> str | None:
    """The smdebug source folder (the one holding ``framework/``) that local ``location`` is or lies in."""
    if "://" in location:
        return None
    path = Path(location).expanduser().absolute()
    for folder in (path, *path.parents):
        if folder.name == "framework" and folder.parent != folder:
            return str(folder.parent)
        if (folder / "framework").is_dir():
            return str(folder)
    return None


def missing_store_hint(location: str) -> str:
    """What to do about a store that does not exist at ``location``; never proposes a store inside a source."""
    source = source_root_around(location)
    if source is None:
        return f"run 'proflake ingest SOURCE --store {location}' first"
    suggestion = default_store_location()
    if source_root_around(suggestion) is not None:
        suggestion = str(Path(source).parent / f"{Path(source).name}-proflake-store")
    where = "is" if Path(location).expanduser().absolute() == Path(source) else "lies in"
    return (
        f"it {where} the smdebug job folder {source!r}, a source to ingest, not a store; "
        f"ingest it into a store outside it: proflake ingest {source} --store {suggestion}"
    )
