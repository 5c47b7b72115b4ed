"""Graceful termination with real processes: SIGTERM and SIGHUP during parsing, between commits and during
compaction end in one line and exit 143 / 129, with the lock released, no worker left, and a store equal
to a clean ingest after the next run (docs/operations.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proflake import Profiles, ingest
from proflake.errors import ExitCode
from proflake.store.lock import LOCK_NAME
from test_batches import build_corpus, snapshot

STOPPED = "; the writer lock is released and nothing half-written is visible"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("signals")
    build_corpus(root / "src", nodes=2, steps=6)
    ingest(str(root / "src"), str(root / "clean"))
    return root / "src", snapshot(str(root / "clean"))


def start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    # A session of its own: afterwards no process of it (a parse worker) may be left.
    return subprocess.Popen(
        [sys.executable, "-m", "proflake.cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )


def session_processes(sid: int) -> list[int]:
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # fields: state, ppid, pgrp, session
                left.append(int(entry.name))
    return left


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def finish(proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session (start): nothing of it outlives the test
        proc.communicate()
        pytest.fail("the stopped command did not exit within 120 s (hung at exit?)")
    deadline = time.monotonic() + 10
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # an idle worker notices its parent is gone
    assert session_processes(proc.pid) == [], err
    assert "Traceback" not in err, err
    return err


def assert_recovers(source: Path, store: Path, clean: dict) -> None:
    assert not (store / LOCK_NAME).exists()
    spool = store / "_proflake" / "spool"
    assert not spool.exists() or not any(spool.iterdir()), list(spool.iterdir())
    again = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", str(store)],
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert snapshot(str(store)) == clean


@pytest.mark.parametrize(("commit", "name"), [(1, "SIGTERM"), (5, "SIGTERM"), (2, "SIGHUP")])
def test_a_signal_between_commits_stops_ingest_cleanly(corpus, tmp_path, commit, name):
    source, clean = corpus
    store = tmp_path / "store"
    proc = start(["ingest", str(source), "--store", str(store)], {"PROFLAKE_SIGNAL_AFTER_COMMITS": f"{commit}:{name}"})
    err = finish(proc)
    code = ExitCode.TERMINATED if name == "SIGTERM" else ExitCode.HANGUP
    assert proc.returncode == code == 128 + getattr(signal, name)
    assert err.splitlines()[-1] == f"proflake: stopped by {name}{STOPPED}"
    # The batch says what happened until the next run repairs it.
    assert Profiles(str(store)).batches()["status"].to_pylist()[0] == "interrupted"
    assert_recovers(source, store, clean)


def test_sigterm_while_parsing_stops_the_workers(corpus, tmp_path):
    source, clean = corpus
    store = tmp_path / "store"
    proc = start(["ingest", str(source), "--store", str(store), "--workers", "2"])
    deadline = time.monotonic() + 120
    while not children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # the workers start while the parent lists: parsing is about to begin
    proc.send_signal(signal.SIGTERM)
    err = finish(proc)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal arrived (a very fast machine)")
    assert proc.returncode == ExitCode.TERMINATED
    assert err.splitlines()[-1] == f"proflake: stopped by SIGTERM{STOPPED}"
    assert_recovers(source, store, clean)


def test_a_second_signal_exits_at_once(corpus, tmp_path):
    source, clean = corpus
    store = tmp_path / "store"
    proc = start(["ingest", str(source), "--store", str(store)])
    deadline = time.monotonic() + 120
    while not children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signals arrived")
    # Either the second signal met the cleanup (exit at once, 143) or the cleanup was already done and
    # its line printed; then a second signal landing after the handlers were restored ends the exiting
    # process by SIGTERM itself (-15): seen once in ~10 clean runs. Both leave the store as below.
    last = err.splitlines()[-1]
    assert last in ("proflake: SIGTERM again: exiting now", f"proflake: stopped by SIGTERM{STOPPED}"), err
    if last.startswith("proflake: SIGTERM again"):
        assert proc.returncode == ExitCode.TERMINATED, err
    else:
        assert proc.returncode in (ExitCode.TERMINATED, -signal.SIGTERM), err
    time.sleep(1.0)
    # Even an exit at once leaves a store the next run completes (as after a kill -9).
    again = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", str(store), "--wait", "30"],
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert snapshot(str(store)) == clean


def test_sigterm_during_compaction_changes_no_answer(corpus, tmp_path):
    source, clean = corpus
    store = tmp_path / "store"
    for nodes in (1, 2):  # two batches: files to compact
        build_corpus(tmp_path / f"part{nodes}", nodes=nodes, steps=6)
    ingest(str(tmp_path / "part1"), str(store))
    # Both parts' job folders are named job-1: the second needs its own id (job_conflict otherwise).
    assert not ingest(str(tmp_path / "part2"), str(store), job_id="job-2").failed
    before = snapshot(str(store))
    proc = start(["compact", "--store", str(store), "--retention-hours", "0"], {"PROFLAKE_SIGNAL_AFTER_COMMITS": "2"})
    err = finish(proc)
    assert proc.returncode == ExitCode.TERMINATED
    assert err.splitlines()[-1] == f"proflake: stopped by SIGTERM{STOPPED}"
    assert not (store / LOCK_NAME).exists()
    assert snapshot(str(store)) == before
    done = subprocess.run([sys.executable, "-m", "proflake.cli", "compact", "--store", str(store)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert snapshot(str(store)) == before


def test_a_signal_while_the_record_thread_starts_never_hangs_the_exit():
    """Ingest records its batch as started on a thread of its own. A signal's exception raised in the caller
    while that thread was starting (Thread.start waits for it) once left a ThreadPoolExecutor worker that
    nobody would tell to stop: the interpreter waited for it at exit forever (an ingest SIGTERMed as parsing
    began, found alive 20 minutes after its test). The thread now ends with its one call."""
    code = (
        "import threading\n"
        "from proflake.ingestion.background import in_background\n"
        "real_start = threading.Thread.start\n"
        "def start_then_signal(self):\n"
        "    real_start(self)\n"
        "    raise KeyboardInterrupt  # as Terminated would be, raised while start() waited\n"
        "threading.Thread.start = start_then_signal\n"
        "try:\n"
        "    in_background('proflake-record', lambda: None)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "interrupted"), done.stderr
