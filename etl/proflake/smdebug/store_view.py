"""The store behind the smdebug-compatible classes: which store, and one view of it per source.

A notebook re-runs ``cProfileAnalysis(folder)`` in cell after cell; every object made for the same
source in one process shares one view (one DuckDB connection over the store's tables), reopened only
when the store's Delta logs moved on. The view also keeps its answers: asked again while nothing changed
(the source's listing shows no new or changed file, the store's logs did not move), a fetch returns what
it returned before, without a query, since the data it was computed from is the same.
"""

from __future__ import annotations

import os
import pstats
import sys
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path

from proflake.ingestion.probe import Known
from proflake.query.profiles import FetchResult, Profiles
from proflake.schema import ALL_TABLES
from proflake.store.store import Store


def default_store() -> str:
    """``$PROFLAKE_STORE``, else a store in the user's cache folder, shared by every notebook: the
    compatible classes are made where a notebook runs, and a ``./proflake-store`` there is litter."""
    if os.environ.get("PROFLAKE_STORE"):
        return os.environ["PROFLAKE_STORE"]
    if sys.platform == "win32":
        cache = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        cache = Path.home() / "Library" / "Caches"
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return str(cache / "proflake" / "smdebug-store")


ANSWERS_KEPT = 64  # answers a view keeps, the oldest dropped first (time windows are endless)


class Answer:
    """One fetch's result as the view keeps it, with the ``pstats.Stats`` built from it (per group)."""

    def __init__(self, result: FetchResult) -> None:
        self.result = result
        self._pstats: dict[tuple, pstats.Stats] = {}

    def pstats(self, group: tuple = ()) -> pstats.Stats:
        """The result (or one group of it) as a pstats.Stats: built at the first call, then copied, so a
        caller that sorts or adds to its Stats never changes what the next caller gets."""
        made = self._pstats.get(group)
        if made is None:
            made = self._pstats[group] = self.result.to_pstats(group)
        copy = pstats.Stats()  # its stream is today's stdout, as a Stats built now would have
        copy.stats, copy.files = dict(made.stats), list(made.files)  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        copy.total_calls, copy.prim_calls, copy.total_tt = made.total_calls, made.prim_calls, made.total_tt  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        copy.top_level, copy.max_name_len = set(made.top_level), made.max_name_len  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        return copy


class _View:
    """A view of the store for one source, shared by the analysis objects made for that source in this
    process while any of them is alive: a notebook that re-runs ``analysis = cProfileAnalysis(folder)``
    makes the new object while the old one still holds the view, and reuses its open DuckDB connection
    instead of opening the store's tables again. Closed when the last object holding it goes.
    ``generation`` counts its refreshes; ``answers`` holds the fetches answered since the last one."""

    def __init__(self, profiles: Profiles) -> None:
        self.profiles = profiles
        self.known: Known | None = None  # the files the view answers from, and the quarantined ones
        self.store_exists = False  # as of the last time ``known`` was filled
        self.generation = 0
        self.heads: tuple | None = None  # _log_heads when the view was (re)opened
        self.answers: dict[Hashable, Answer] = {}

    def answer(self, key: Hashable, fetch: Callable[[], FetchResult]) -> Answer:
        """The answer to the question ``key`` names, fetched only if not asked since the last refresh."""
        found = self.answers.pop(key, None)  # popped and put back: the dict's order is last use
        if found is None:
            found = Answer(fetch())
            while len(self.answers) >= ANSWERS_KEPT:
                del self.answers[next(iter(self.answers))]
        self.answers[key] = found
        return found

    def __del__(self) -> None:
        self.profiles.close()  # its connection and the caller-edge thread

    def refreshed(self) -> None:
        self.known = None
        self.answers.clear()
        self.generation += 1
        self.heads = _log_heads(self.profiles.store)

    def follow_store(self) -> None:
        """Reopen the view if the store moved on since (another ingest, a compaction): a snapshot's
        files may be gone after a vacuum. Local stores only; an S3 store's view is reopened when the
        source shows something new, or with ``refresh_stats=True`` on an analysis without a source."""
        heads = _log_heads(self.profiles.store)
        if heads is not None and heads != self.heads:
            self.profiles.refresh()
            self.refreshed()


def _log_heads(store: Store) -> tuple | None:
    """The newest commit file of each table's Delta log, for a local store (a listing of a few folders)."""
    if store.is_remote:
        return None
    heads = []
    for name in ALL_TABLES:
        try:
            names = os.listdir(os.path.join(store.table_uri(name), "_delta_log"))
        except OSError:
            names = []
        heads.append(max((n for n in names if n.endswith(".json")), default=None))
    return tuple(heads)


_VIEWS: weakref.WeakValueDictionary[tuple[str, str | None], _View] = weakref.WeakValueDictionary()


def view_for(store: Store, source_uri: str | None) -> _View:
    key = (store.location, source_uri)
    view = _VIEWS.get(key)
    if view is None:
        view = _View(Profiles(store, source_prefix=_prefix(source_uri) if source_uri else None))
        view.heads = _log_heads(store)
        _VIEWS[key] = view
    return view


def _prefix(uri: str) -> str:
    """The source URI as a prefix that matches files below it only (not ``/data/job10`` for ``/data/job1``)."""
    sep = "/" if "://" in uri else os.sep
    return uri if uri.endswith(sep) else uri + sep
