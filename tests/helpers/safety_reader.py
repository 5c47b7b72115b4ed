"""A reader for the data-safety tests: asks the store the same questions whenever its logs changed while
writers run and are killed, and appends each answer (or the error) as one JSON line to a file, until a stop
file appears.

It answers right after each change it sees (a commit, a repair, a rollback), which is where a torn state
would show, instead of asking in a busy loop: the loop spent a core for the whole test (~45 s of CPU in
test_full_refresh_killed_after_every_commit_and_at_random_never_shows_two_generations) mostly re-reading
a store that had not changed. A change is one a reader can see (``_visible``): a table's newest committed
log entry, or a file of the store's own metadata that readers read (its schema record, the roll-ups'
check). The log folders' times only say when to look: they also change when a writer takes or gives back
the lock or writes a commit's temporary file, and answering those (46% of the answers in that test, each
the same snapshot as the answer before) cost ~5 s of CPU.

Usage: python safety_reader.py STORE OUT STOP
"""

from __future__ import annotations

import json
import os
import sys
import time

from proflake import Profiles


def answer(store: str) -> dict:
    """Counts of the live rows and one fetch, all from one snapshot of the store (one version of every
    table, as a reader gets it), so a torn commit cannot hide between two reads."""
    profiles = Profiles(store)
    try:
        con = profiles.connection()
        calls, rows = con.sql("SELECT sum(total_calls), count(*) FROM function_stats").fetchall()[0]
        frames = con.sql("SELECT count(*) FROM pyinstrument_frames").fetchall()[0][0]
        intervals = con.sql("SELECT count(*) FROM intervals").fetchall()[0][0]
        step = profiles.by_step(1, all_jobs=True).table
    finally:
        profiles.close()
    return {
        "calls": int(calls or 0), "rows": rows, "frames": frames, "intervals": intervals,
        "by_step_calls": int(sum(step.column("total_calls").to_pylist())) if step.num_rows else 0,
    }


def _folders(store: str) -> list[str]:
    """The store's folders (its tables and ``_proflake``), sorted; none while it cannot be listed."""
    try:
        return sorted(e.name for e in os.scandir(store) if e.is_dir())
    except OSError:
        return []


def _state(store: str) -> tuple:
    """What changes when anything is committed: the entries of every table's log folder and of the
    store's own metadata (``_proflake``)."""
    seen = []
    for name in _folders(store):
        for folder in (os.path.join(store, name, "_delta_log"), os.path.join(store, name)):
            try:
                info = os.stat(folder)
            except OSError:
                continue
            seen.append((folder, info.st_mtime_ns, info.st_ino))
            break
    return tuple(seen)


# What a reader reads besides the tables: files of the store's own metadata folder (the lock is not one).
_METADATA = "_proflake"
_NOT_READ = ("writer.lock",)


def _visible(store: str) -> tuple:
    """What a reader's answer depends on: each table's newest committed log entry (a commit's temporary
    file is not one), and the name, size and identity of each file in ``_proflake`` that readers read."""
    seen = []
    for name in _folders(store):
        folder = os.path.join(store, name)
        if name == _METADATA:
            try:
                files = [e for e in os.scandir(folder) if not e.name.startswith(_NOT_READ)]
            except OSError:
                continue
            for e in files:
                try:
                    if e.is_file():  # a file renamed or removed since the listing is simply not seen
                        info = e.stat()
                        seen.append((e.name, info.st_size, info.st_mtime_ns, info.st_ino))
                except OSError:
                    continue
            continue
        try:
            log = [n for n in os.listdir(os.path.join(folder, "_delta_log")) if n.endswith((".json", ".parquet"))]
        except OSError:
            continue
        seen.append((name, max(log, default="")))
    return tuple(sorted(seen))


def main(store: str, out: str, stop: str) -> None:
    last: tuple | None = None
    answered: tuple | None = None
    with open(out, "a", encoding="utf-8") as f:
        while not os.path.exists(stop):
            now = _state(store)
            if now == last:
                time.sleep(0.005)  # pacing the poll of two dozen stat() calls, not synchronisation
                continue
            last = now
            visible = _visible(store)
            if visible == answered:
                continue  # the lock or a commit's temporary file: the snapshot answered last is still the store
            answered = visible
            try:
                line = answer(store)
            except Exception as e:  # noqa: BLE001 (every error is an answer the test rejects
                line = {"error": f"{type(e).__name__}: {e}"}
            f.write(json.dumps(line, sort_keys=True) + "\n")
            f.flush()


if __name__ == "__main__":
    main(*sys.argv[1:4])
