"""Nightly-batch behaviour: idempotent and incremental runs, replaced files, kills at any moment,
concurrent runs, and compaction that changes no answer."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.forked import INLINE, Zygote
from helpers.profiles import JobBuilder, assert_same_pstats, pstats_of
from helpers.recovery import recover
from proflake import Profiles, ingest
from proflake.errors import StoreError, StoreLockedError
from proflake.store.compact import compact
from proflake.store.lock import LOCK_NAME, StoreLock
from proflake.store.store import FACT_TABLES, Store, raw_view

STEP = "{mode}-{step}-stepstart-{start}_{mode}-{step}-stepend-{end}"


def build_corpus(root: Path, nodes: int = 3, steps: int = 12, pyinstrument_every: int = 4) -> list[Path]:
    job = JobBuilder(root / "job-1")
    paths = []
    for n in range(nodes):
        node = f"algo-{n + 1}"
        paths.append(job.cprofile(node, f"prestepzero-*-start-{1000 + n}_train-0-stepstart-{2000 + n}", "c"))
        for step in range(steps):
            start = 10_000 + step * 1000 + n
            name = STEP.format(mode="train", step=step, start=start, end=start + 900)
            paths.append(job.cprofile(node, name, "abc"[step % 3], repeat=1 + step % 2))
            if step % pyinstrument_every == 0:
                paths.append(job.pyinstrument(node, name))
        paths.append(job.cprofile(node, f"prestepzero-*-end-{90_000 + n}_posthookclose-*-end-{95_000 + n}", "a"))
    return paths


def snapshot(store: str) -> dict[str, list]:
    """Everything a reader can see, minus what differs between equivalent runs (batch ids, the interval
    ids made from them, times): facts name their interval by its file."""
    con = Store(store).connect()
    out = {
        "intervals": con.sql("SELECT * EXCLUDE (batch_id, interval_id, ingested_at) FROM intervals ORDER BY ALL").fetchall(),
    }
    for name in FACT_TABLES:
        out[name] = con.sql(
            f"SELECT i.source_uri, f.* EXCLUDE (batch_id, interval_id) FROM {name} f JOIN intervals i USING (interval_id) ORDER BY ALL"
        ).fetchall()
        # Nothing stored beyond what is visible: no leftovers of killed or replaced runs.
        hidden = con.sql(f"SELECT count(*) FROM {raw_view(name)}").fetchall()[0][0] - len(out[name])
        out[f"{name}:hidden_rows"] = [hidden]
    con.close()
    return out


@pytest.fixture(scope="module")
def zygote():
    """The kill sweeps' runs are forked from one interpreter that has imported proflake (helpers/forked.py)."""
    with Zygote() as z:
        yield z


def run_ingest(source: Path, store: Path, *extra: str, env: dict | None = None, zygote: Zygote | None = None):
    """``proflake ingest SOURCE --store STORE EXTRA``: a new interpreter, or a child forked from ``zygote``."""
    if zygote is not None:
        return zygote.run(["ingest", str(source), "--store", str(store), *extra], env)
    return subprocess.Popen(
        [sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", str(store), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_rerun_is_idempotent_and_incremental(tmp_path):
    build_corpus(tmp_path / "src", nodes=2, steps=3)
    store = str(tmp_path / "store")
    first = ingest(str(tmp_path / "src"), store)
    before = snapshot(store)
    for _ in range(3):
        again = ingest(str(tmp_path / "src"), store)
        assert (again.new_intervals, again.bytes_read, again.total_rows) == (0, 0, 0)
        assert again.unchanged == first.new_intervals
    assert snapshot(store) == before
    # A new file is the only thing the next run reads.
    extra = JobBuilder(tmp_path / "src" / "job-1").cprofile("algo-1", STEP.format(mode="eval", step=0, start=50_000, end=50_500))
    added = ingest(str(tmp_path / "src"), store)
    assert added.new_intervals == 1 and added.bytes_read == extra.stat().st_size
    statuses = Profiles(store).batches()["status"].to_pylist()
    assert statuses == ["committed"] * 5


def test_an_ingest_hands_its_open_tables_from_step_to_step(tmp_path, monkeypatch):
    """Each Delta open reads the table's log (locally ~1.5 ms of CPU; on S3 a LIST and GETs, counted by
    test_s3). A fresh store's ingest opens batches for repair and each of its two records, intervals for
    repair, the migrations and the commit, which hands it and the fact tables to the clean-up and the
    roll-ups, and once more after the roll-ups' writes, to note their freshness against the table as it
    is then (a table created again meanwhile would be another one); every other table once. An unchanged
    re-run: batches for repair and its record, what the quarantine and the roll-ups' freshness read,
    once each. DuckDB databases (~14 ms of CPU each: DuckDB builds its function catalog for every one): a
    first ingest makes the roll-ups' alone (no batch but its own is in the store to ask about), an
    unchanged re-run the manifest's and the one its repair step reads the batches with."""
    from collections import Counter

    from helpers.profiles import LEGACY
    from helpers.table_opens import counted_databases, counted_opens

    opens = counted_opens(monkeypatch)
    databases = counted_databases(monkeypatch)
    store = str(tmp_path / "store")
    assert ingest(str(LEGACY), store, executor="inline").new_intervals
    once = dict.fromkeys((*FACT_TABLES, "phase_function_stats", "phase_function_callers"), 1)
    assert Counter(opens) == Counter({"batches": 3, "intervals": 4, **once}), opens
    assert databases == ["__init__"], databases  # Snapshot.__init__, for refresh_phase_rollups
    opens.clear()
    databases.clear()
    assert ingest(str(LEGACY), store, executor="inline").new_intervals == 0
    assert Counter(opens) == Counter(
        {"batches": 2, "ingest_errors": 1, "intervals": 1, "phase_function_stats": 1, "phase_function_callers": 1}
    ), opens
    assert databases == ["bounded_connection"], databases  # the listing's comparison with the live intervals


def test_rerun_counts_unchanged_files_and_pairs_what_is_new(tmp_path):
    """A re-run skips unchanged files without interpreting them again; a pyinstrument html still pairs
    with a json that is new, and an html without a json is reported on every run, as on the first."""
    build_corpus(tmp_path / "src", nodes=1, steps=4, pyinstrument_every=2)
    job = JobBuilder(tmp_path / "src" / "job-1")
    lonely = job.stats_dir("pyinstrument", "algo-1", "train-9-stepstart-90000_train-9-stepend-91000")
    lonely.mkdir(parents=True)
    (lonely / "python_stats.html").write_text("<html></html>")
    store = str(tmp_path / "store")
    first = ingest(str(tmp_path / "src"), store)
    assert first.unrecognised == [str(lonely / "python_stats.html")]
    again = ingest(str(tmp_path / "src"), store)
    assert (again.new_intervals, again.unchanged, again.intervals_seen) == (0, first.new_intervals, first.intervals_seen)
    assert again.unrecognised == first.unrecognised and again.files_seen == first.files_seen
    # A new pyinstrument interval, listed html first: both files belong to the one new interval.
    added = job.pyinstrument("algo-1", "train-8-stepstart-80000_train-8-stepend-81000")
    third = ingest(str(tmp_path / "src"), store)
    assert (third.new_intervals, third.unchanged) == (1, first.new_intervals)
    html_uris = Profiles(store).sql("SELECT html_uri FROM intervals WHERE source_uri = $uri", {"uri": str(added)})
    assert html_uris["html_uri"].to_pylist() == [str(added.with_name("python_stats.html"))]


def test_changed_file_replaces_its_rows(tmp_path):
    paths = build_corpus(tmp_path / "src", nodes=1, steps=2, pyinstrument_every=99)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "src"), store)
    target = next(p for p in paths if "train-1-stepstart" in str(p))
    from helpers.profiles import write_cprofile

    write_cprofile(target.parent, "b", repeat=3)  # the job rewrote this interval's stats
    report = ingest(str(tmp_path / "src"), store)
    assert (report.new_intervals, report.replaced_intervals) == (1, 1)
    profiles = Profiles(store)
    assert profiles.list_profile_stats().num_rows == len(paths)
    assert_same_pstats(profiles.by_step(1).to_pstats().stats, pstats_of([target]))
    assert snapshot(store)["function_stats:hidden_rows"] == [0]


def test_intervals_written_in_many_files_commit_as_one_batch(tmp_path, monkeypatch):
    """A large batch writes its intervals as several data files; they still commit at once, with every
    row, whether they are appended, replace changed files, or replace everything (a full refresh)."""
    import importlib

    commit_module = importlib.import_module("proflake.ingestion.commit")
    paths = build_corpus(tmp_path / "src", nodes=2, steps=6, pyinstrument_every=3)
    reference = str(tmp_path / "reference")
    ingest(str(tmp_path / "src"), reference)
    expected = snapshot(reference)
    monkeypatch.setattr(commit_module.IntervalRows, "SPOOL_ROWS", 4)
    monkeypatch.setenv("PROFLAKE_FLUSH_ROWS", "50")  # small stripes: parsed files arrive a few at a time
    store = str(tmp_path / "store")
    first = ingest(str(tmp_path / "src"), store)
    assert first.new_intervals == len(expected["intervals"]) > 8
    versions_after_first = Store(store).delta("intervals").version()
    assert len(Store(store).delta("intervals").file_uris()) > 1
    assert snapshot(store) == expected
    from helpers.profiles import write_cprofile

    target = next(p for p in paths if "train-2-stepstart" in str(p) and "algo-1" in str(p))
    write_cprofile(target.parent, "b", repeat=2)
    changed = ingest(str(tmp_path / "src"), store)
    assert (changed.new_intervals, changed.replaced_intervals) == (1, 1)
    assert Profiles(store).list_profile_stats(all_jobs=True).num_rows == len(expected["intervals"])
    again = ingest(str(tmp_path / "src"), store, full_refresh=True)
    assert again.new_intervals == len(expected["intervals"])
    assert Store(store).delta("intervals").version() == versions_after_first + 2
    ingest(str(tmp_path / "src"), reference)  # the reference sees the changed file too
    assert snapshot(store) == snapshot(reference)
    assert not (Path(store) / "_proflake" / "spool").exists()


def test_full_refresh_rebuilds_from_scratch(tmp_path):
    build_corpus(tmp_path / "src", nodes=1, steps=2)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "src"), store)
    before = snapshot(store)
    report = ingest(str(tmp_path / "src"), store, full_refresh=True)
    assert report.new_intervals == len(before["intervals"]) and report.unchanged == 0
    assert snapshot(store) == before


def _kill_and_recover(source: Path, store: Path, delay: float, env: dict, zygote: Zygote) -> str:
    proc = run_ingest(source, store, env=env, zygote=zygote)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return "killed"
    proc.wait()
    return "finished"


def _has_unfinished_batch(store: Path) -> bool:
    """Did the kill land inside a batch (after it started writing, before it finished)?"""
    if not Store(str(store)).exists():
        return False
    try:
        con = Store(str(store)).connect()
    except StoreError:
        return False  # killed while creating the tables: before any batch
    statuses = con.sql(
        "SELECT bool_or(event = 'started') AND NOT bool_or(event <> 'started') FROM batches GROUP BY batch_id"
    ).fetchall()
    con.close()
    return any(row[0] for row in statuses)


def _kill_test(tmp_path: Path, timed_points: int, seed: int, zygote: Zygote) -> dict:
    """Kill real ingest processes after every Delta commit of a run (and of the repairing run after it),
    and at random moments; after each, a plain re-run must leave exactly what a clean ingest leaves."""
    source = tmp_path / "src"
    build_corpus(source, nodes=3, steps=10)
    env = {"PROFLAKE_FLUSH_ROWS": "1500"}  # many commits per run: many places to be killed in
    clean = tmp_path / "clean"
    started = time.monotonic()
    assert run_ingest(source, clean, env=env, zygote=zygote).wait() == 0  # the timed kills' yardstick: real workers
    duration = time.monotonic() - started
    expected = snapshot(str(clean))

    outcomes = {"kill_points": 0, "killed": 0, "runs": 0, "left_unfinished_batch": 0, "differences": 0}

    def check(store: Path) -> None:
        recover(source, store, env)
        outcomes["runs"] += 1
        if snapshot(str(store)) != expected:
            outcomes["differences"] += 1

    # 1. After the k-th commit, for every k until a run gets through; every 3rd time, also kill the
    #    recovering run after its first commit (inside its repair). What is killed is the committing
    #    process: it parses on its own threads (INLINE). The timed kills (2.) keep real parse workers,
    #    which a kill leaves running without their parent.
    k = 1
    while True:
        store = tmp_path / f"after-{k}"
        code = run_ingest(source, store, *INLINE, env={**env, "PROFLAKE_KILL_AFTER_COMMITS": str(k)}, zygote=zygote).wait()
        outcomes["runs"] += 1
        if code == 0:
            break
        assert code == -signal.SIGKILL
        outcomes["kill_points"] += 1
        outcomes["killed"] += 1
        outcomes["left_unfinished_batch"] += _has_unfinished_batch(store)
        if k % 3 == 0:
            code = run_ingest(source, store, *INLINE, env={**env, "PROFLAKE_KILL_AFTER_COMMITS": "1"}, zygote=zygote).wait()
            outcomes["runs"] += 1
            outcomes["killed"] += code == -signal.SIGKILL
        check(store)
        k += 1
    # 2. At random moments (mid-commit, mid-write, during start-up).
    rng = random.Random(seed)
    for point in range(timed_points):
        store = tmp_path / f"timed-{point}"
        outcome = _kill_and_recover(source, store, duration * rng.uniform(0.3, 1.0), env, zygote)
        outcomes["runs"] += 1
        outcomes["kill_points"] += 1
        outcomes["killed"] += outcome == "killed"
        outcomes["left_unfinished_batch"] += _has_unfinished_batch(store)
        check(store)
    return outcomes


def test_killed_runs_leave_nothing_lost_or_doubled(tmp_path, zygote):
    outcomes = _kill_test(tmp_path, timed_points=4, seed=7, zygote=zygote)
    print(f"kill test: {outcomes}")
    assert outcomes["differences"] == 0
    assert outcomes["kill_points"] >= 8 and outcomes["left_unfinished_batch"] >= 5


@pytest.mark.slow
def test_killed_runs_many_points(tmp_path, zygote):
    outcomes = _kill_test(tmp_path, timed_points=60, seed=11, zygote=zygote)
    print(f"kill test (slow tier): {outcomes}")
    assert outcomes["differences"] == 0


def test_fact_files_of_a_killed_run_stay_out_of_the_tables(tmp_path):
    """Workers write into the store's spool; a run killed after its first fact commit leaves the other
    tables' files there, never in a table, and the next run removes them."""
    build_corpus(tmp_path / "src", nodes=2, steps=6)
    store = tmp_path / "store"
    # Commits: 'started' in batches, then function_stats: killed before function_callers commits.
    code = run_ingest(tmp_path / "src", store, env={"PROFLAKE_KILL_AFTER_COMMITS": "2"}).wait()
    assert code == -signal.SIGKILL
    spooled = list((store / "_proflake" / "spool").rglob("*.parquet"))
    assert any("function_callers" in p.parts for p in spooled)
    assert not list((store / "function_callers").glob("*.parquet"))
    assert run_ingest(tmp_path / "src", store).wait() == 0
    assert not (store / "_proflake" / "spool").exists()
    on_disk = {p.name for p in (store / "function_callers").glob("*.parquet")}
    assert on_disk == {Path(u).name for u in Store(str(store)).delta("function_callers").file_uris()}


def test_killed_replacing_run_recovers(tmp_path, zygote):
    """Kills after every commit of a run that replaces changed files: a reader never sees two versions
    of one file, and the next run ends where a clean run ends."""
    import shutil

    from helpers.profiles import write_cprofile

    paths = build_corpus(tmp_path / "src", nodes=2, steps=6, pyinstrument_every=99)
    v1 = tmp_path / "v1"
    ingest(str(tmp_path / "src"), str(v1))
    for path in paths[1::3]:
        write_cprofile(path.parent, "b", repeat=2)
    clean = tmp_path / "clean"
    shutil.copytree(v1, clean)
    ingest(str(tmp_path / "src"), str(clean))
    expected = snapshot(str(clean))
    env = {"PROFLAKE_FLUSH_ROWS": "800"}
    k = 1
    while True:
        store = tmp_path / f"after-{k}"
        shutil.copytree(v1, store)
        code = run_ingest(tmp_path / "src", store, *INLINE, env={**env, "PROFLAKE_KILL_AFTER_COMMITS": str(k)}, zygote=zygote).wait()
        # What a reader sees of intervals: only that table opened, read from its files (no copy in memory).
        con = Store(str(store)).connect(tables=("intervals",), snapshot_intervals=False)
        uris = [row[0] for row in con.sql("SELECT source_uri FROM intervals").fetchall()]
        con.close()
        assert sorted(uris) == sorted(set(uris)) and len(uris) == len(paths), f"after commit {k}"
        recover(tmp_path / "src", store)
        assert snapshot(str(store)) == expected, f"after commit {k}"
        if code == 0:
            break
        k += 1
    assert k >= 5  # facts, intervals-with-replace, clean-up deletes and bookkeeping were all crossed


def test_a_second_writer_is_refused_then_waits(tmp_path):
    build_corpus(tmp_path / "src", nodes=1, steps=1)
    store = Store(str(tmp_path / "store"))
    store.create()
    with StoreLock(store, purpose="test holder"):
        done = subprocess.run(
            [sys.executable, "-m", "proflake.cli", "ingest", str(tmp_path / "src"), "--store", str(tmp_path / "store")],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 4 and done.stdout == ""
        assert "is in use by test holder" in done.stderr and "--wait" in done.stderr
        waiting = run_ingest(tmp_path / "src", tmp_path / "store", "--wait", "30")
        time.sleep(1.5)
        assert waiting.poll() is None  # still waiting for the lock
    assert waiting.wait(timeout=60) == 0


def test_a_lock_left_by_a_dead_process_is_broken_at_once(tmp_path):
    build_corpus(tmp_path / "src", nodes=1, steps=1)
    store = Store(str(tmp_path / "store"))
    store.create()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = Path(store.root) / LOCK_NAME
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        '{"host": "%s", "pid": %d, "token": "x", "acquired": %f, "expires": %f, "purpose": "dead run"}'
        % (socket.gethostname(), dead.pid, time.time(), time.time() + 3600)
    )
    report = ingest(str(tmp_path / "src"), store)
    assert report.new_intervals > 0 and not lock.exists()


def test_a_live_lock_from_another_host_blocks_until_its_lease_expires(tmp_path):
    store = Store(str(tmp_path / "store"))
    store.create()
    lock = Path(store.root) / LOCK_NAME
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        '{"host": "elsewhere", "pid": 1, "token": "x", "acquired": %f, "expires": %f, "purpose": "remote run"}'
        % (time.time(), time.time() + 1.0)
    )
    with pytest.raises(StoreLockedError, match="remote run"):
        StoreLock(store).acquire()
    with StoreLock(store, wait=5):
        pass


def test_compaction_changes_no_answer_and_readers_keep_working(tmp_path):
    source = tmp_path / "src"
    build_corpus(source, nodes=2, steps=4)
    store = str(tmp_path / "store")
    for i in range(4):  # several nightly batches: several small files per table
        JobBuilder(source / "job-1").cprofile("algo-1", STEP.format(mode="eval", step=i, start=60_000 + i * 100, end=60_050 + i * 100))
        ingest(str(source), store)
    before = snapshot(store)
    profiles = Profiles(store)
    def normal(table) -> list[tuple]:
        # Sums may add floats in another order after files merge: compare to 12 significant digits.
        rows = [tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row.values()) for row in table.to_pylist()]
        return sorted(rows, key=repr)

    def answers(p: Profiles) -> tuple:
        return (
            normal(p.by_training_phase().table),
            normal(p.by_job_phase(per_node=True).table),
            normal(p.by_step(1).table),
        )

    expected = answers(profiles)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        # Opened before compaction: its file list goes stale, and must still answer the same.
        reading = Profiles(store)
        while not stop.is_set():
            try:
                assert answers(reading) == expected
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    report = compact(Store(store))
    stop.set()
    thread.join()
    assert not errors, errors[0]
    assert sum(t["files_removed"] for t in report.tables.values()) > 0
    assert len(Store(store).delta("function_stats").file_uris()) == 1
    assert snapshot(store) == before
    assert answers(Profiles(store)) == expected


def test_ingest_logs_progress_lines_when_not_on_a_terminal(tmp_path):
    build_corpus(tmp_path / "src", nodes=1, steps=1)
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "ingest", str(tmp_path / "src"), "--store", str(tmp_path / "store")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert "writing: committing" in lines and lines[-1].startswith("ingested ")
    assert "\r" not in done.stderr


def test_terminal_progress_draws_a_bar_with_files_and_megabytes():
    import io

    from proflake.cli.progress import BarProgress
    from rich.console import Console

    buffer = io.StringIO()
    bar = BarProgress(Console(file=buffer, force_terminal=True, width=120, no_color=True))
    bar.reading(total_files=10, total_bytes=10_000_000)
    for _ in range(10):
        bar.advance(1, 1_000_000)
    bar.bar.refresh()  # draw the last update
    bar.done()
    assert "10/10 files, 10.0/10.0 MB" in buffer.getvalue()


def test_live_batches_are_read_from_the_log_s_statistics_and_asked_of_duckdb_only_where_they_cannot_tell(tmp_path):
    """A file whose batch_id statistics are one value holds that batch's intervals; a compacted file spanning
    several batches may hold any batch between its min and its max, which only a read can tell; a batch
    no file can hold has no live interval."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from proflake.ingestion.bookkeeping import live_batches_among

    uri = str(tmp_path / "intervals")
    write_deltalake(uri, pa.table({"batch_id": ["a1", "a1"], "n": [1, 2]}))
    write_deltalake(uri, pa.table({"batch_id": ["b1", "b3"], "n": [3, 4]}), mode="append")  # as compacted
    write_deltalake(uri, pa.table({"batch_id": pa.array([], pa.string()), "n": pa.array([], pa.int64())}), mode="append")
    asked: list[list[str]] = []

    def ask(batches: list[str]) -> set[str]:
        asked.append(batches)
        return {b for b in batches if b in ("b1", "b3")}  # what DuckDB would read in the files

    table = DeltaTable(uri)
    assert live_batches_among(table, ["a1", "b1", "b2", "z9"], ask) == {"a1", "b1"}
    assert asked == [["b1", "b2"]]  # a1 from its file's statistics; z9 no file can hold
    asked.clear()
    assert live_batches_among(table, ["a1", "c1"], ask) == {"a1"} and asked == []


def test_a_nightly_run_makes_two_duckdb_databases(tmp_path, monkeypatch):
    """A run that adds a file: the listing's comparison with the live intervals, and the roll-ups'. Which
    batches are unfinished (the repair step) and which are still live after its commit are read from the
    batches' and the intervals' log statistics (the tests beside this one), not from a third and a fourth."""
    from helpers.table_opens import counted_databases

    build_corpus(tmp_path / "src", nodes=1, steps=2)
    build_corpus(tmp_path / "more", nodes=2, steps=2)
    store = str(tmp_path / "store")
    first = ingest(str(tmp_path / "src"), store, executor="inline")
    node = tmp_path / "src" / "job-1" / "framework" / "pytorch" / "cprofile" / "algo-2"
    shutil.copytree(tmp_path / "more" / "job-1" / "framework" / "pytorch" / "cprofile" / "algo-2", node)
    databases = counted_databases(monkeypatch)
    again = ingest(str(tmp_path / "src"), store, executor="inline")
    assert again.new_intervals > 0 and again.unchanged == first.new_intervals
    assert sorted(databases) == ["__init__", "bounded_connection"], databases


def test_the_batches_events_read_from_the_log_are_the_table_s_rows(tmp_path):
    """Each event ingest records is a one-row file whose statistics are its values; a repair's file of
    several events and a compacted file are read. Either way: exactly the table's (batch_id, event) rows."""
    from datetime import datetime, timezone

    from proflake.ingestion.bookkeeping import batch_events
    from proflake.schema import arrow_rows

    build_corpus(tmp_path / "src", nodes=1, steps=2)
    store = Store(str(tmp_path / "store"))
    ingest(str(tmp_path / "src"), store.location, executor="inline")
    ingest(str(tmp_path / "src"), store.location, executor="inline")
    now = datetime.now(timezone.utc)
    events = [{"batch_id": f"repaired-{n}", "event": "repaired", "recorded_at": now} for n in range(2)]
    store.append("batches", arrow_rows("batches", events), "repair-test")

    def rows() -> set[tuple[str, str]]:
        return set(store.rows("batches", ["batch_id", "event"]))

    assert len(rows()) == 5 and {"started", "committed", "repaired"} == {e for _, e in rows()}
    assert batch_events(store, store.delta("batches")) == rows()
    compact(store)
    assert len(store.delta("batches").file_uris()) == 1  # one file of five rows, read
    assert batch_events(store, store.delta("batches")) == rows()
