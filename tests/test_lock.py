"""The fenced writer lock (etl/proflake/store/lock.py): each interleaving that once gave two writers, forced
with delays injected through PROFLAKE_LOCK_TEST_HOOKS into real ingest processes, on disk and on the local
S3 server. One writer, no lost commit: the store always ends equal to a clean ingest."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import run_cli
from proflake import ingest
from proflake.store.lock import LOCK_NAME, StoreLock
from proflake.store.store import Store
from test_batches import build_corpus, snapshot
from test_s3 import bucket, config  # noqa: F401 (fixtures; the S3 server itself is conftest's)


def _ingest(source: Path, store: str, env: dict, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", store, "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


@functools.cache
def _s3_client(endpoint: str, key: str, secret: str):
    """One client per server and keys: a new boto3 client costs ~20-80 ms of CPU, and the waits poll."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                        region_name="us-east-1")


def _lock_exists(store: str, env: dict) -> bool:
    if not store.startswith("s3://"):
        return (Path(store) / LOCK_NAME).exists()
    bucket_name, _, prefix = store[5:].partition("/")
    client = _s3_client(env["AWS_ENDPOINT_URL"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    return "Contents" in client.list_objects_v2(Bucket=bucket_name, Prefix=f"{prefix}/{LOCK_NAME}")


def _wait_for_lock(store: str, env: dict, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not _lock_exists(store, env):
        assert time.monotonic() < deadline, "the first run never took the lock"
        time.sleep(0.1)


def _committed_intervals(store: str, env_s3=None) -> int:
    """New intervals over every committed batch: a second writer ingesting the same files shows here."""
    rows = Store(store, s3=env_s3).rows("batches", ["event", "new_intervals"])
    return sum(n or 0 for event, n in rows if event == "committed")


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """(store location, environment, S3Config or None) on local disk and on the local S3 server."""
    if request.param == "local":
        return str(tmp_path / "store"), dict(os.environ), None
    server = request.getfixturevalue("s3")
    name = request.getfixturevalue("bucket")
    return f"s3://{name}/store", server.env(), request.getfixturevalue("config")


_REFERENCES: dict[Path, dict] = {}


def _reference(source: Path) -> dict:
    """The snapshot of a clean ingest of ``source`` (beside it), made once per source."""
    if source not in _REFERENCES:
        ingest(str(source), str(source.parent / "reference"))
        _REFERENCES[source] = snapshot(str(source.parent / "reference"))
    return _REFERENCES[source]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The source the paused-holder and stale-lock tests ingest, in both places: built once per module, so its
    clean ingest (``_reference``) is made once, not once per test (ingest never writes to its source)."""
    source = tmp_path_factory.mktemp("corpus") / "src"
    build_corpus(source, nodes=1, steps=3)
    return source


def test_a_holder_paused_past_its_lease_loses_the_lock_and_never_commits_after(where, corpus, tmp_path):
    store, env, s3config = where
    # A pauses at its first renewal (each commit renews first) for longer than its 2 s lease.
    paused = _ingest(corpus, store, {**env, "PROFLAKE_LOCK_LEASE_S": "2", "PROFLAKE_LOCK_TEST_HOOKS": "delay:renew=12"})
    _wait_for_lock(store, env)
    # The paused holder is a real process; the writer that takes the lock over, and the run after, are
    # not what is tested about processes: they run in this one (helpers/cli.py), ~1 s of CPU less each.
    second = run_cli(["ingest", str(corpus), "--store", store, "--json", "--wait", "60"], env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["new_intervals"] > 0
    _, err = paused.communicate(timeout=300)
    assert paused.returncode == 4, err
    assert "lost the writer lock" in err and "another run took the lock over" in err and "Traceback" not in err
    done = run_cli(["ingest", str(corpus), "--store", store, "--json"], env)
    assert done.returncode == 0 and json.loads(done.stdout)["new_intervals"] == 0
    if s3config is None:
        assert snapshot(store) == _reference(corpus)
    assert _committed_intervals(store, s3config) == len(_reference(corpus)["intervals"])  # one writer's batch


def test_breaking_a_stale_lock_never_removes_the_next_holders(where, corpus, tmp_path):
    store, env, s3config = where
    # A run on another host dies holding the lock, with a short lease.
    holder = StoreLock(Store(store, s3=s3config), purpose="dead run", lease=1.0)
    holder.backend.create(json.dumps({"host": "elsewhere", "pid": 1, "token": "dead", "acquired": time.time(),
                                      "expires": time.time() + 1, "purpose": "dead run", "lease": 1.0}).encode())
    time.sleep(2.5)
    # B judges it stale, then pauses before taking it over; C takes it meanwhile and runs.
    hooks = f"delay:break=6,mark={tmp_path}"
    slow = _ingest(corpus, store, {**env, "PROFLAKE_LOCK_TEST_HOOKS": hooks}, "--wait", "120")
    deadline = time.monotonic() + 120
    while not (tmp_path / "break").exists():  # B has judged the lock stale and paused
        assert time.monotonic() < deadline and slow.poll() is None
        time.sleep(0.05)
    # C runs in this process (helpers/cli.py): B, paused between judging and taking over, is the real one.
    fast = run_cli(["ingest", str(corpus), "--store", store, "--json", "--wait", "120"], env)
    results = [slow.communicate(timeout=300) + (slow.returncode,), (fast.stdout, fast.stderr, fast.returncode)]
    assert [rc for _, _, rc in results] == [0, 0], [err for _, err, _ in results]
    news = sorted(json.loads(out)["new_intervals"] for out, _, _ in results)
    expected = len(_reference(corpus)["intervals"])
    assert news == [0, expected]  # the files were ingested once, by one writer, the other found them
    assert _committed_intervals(store, s3config) == expected
    if s3config is None:
        assert snapshot(store) == _reference(corpus)


def test_s3_renewal_errors_stop_the_holder_before_its_next_commit(s3, bucket, config, tmp_path):  # noqa: F811
    build_corpus(tmp_path / "src", nodes=1, steps=2)
    store = f"s3://{bucket}/store"
    env = {**s3.env(), "PROFLAKE_LOCK_LEASE_S": "1.5", "PROFLAKE_LOCK_TEST_HOOKS": "fail:renew"}
    done = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(tmp_path / "src"), "--store", store],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 4, done.stderr
    assert "could not be renewed" in done.stderr and "Traceback" not in done.stderr
    # The next run (in process: the holder's process is what had to end) finds the lock of a dead process,
    # repairs whatever it left, and ends equal to a clean ingest.
    again = run_cli(["ingest", str(tmp_path / "src"), "--store", store, "--json"], env=s3.env())
    assert again.returncode == 0, again.stderr
    assert Store(store, s3=config).connect().sql("SELECT count(*) FROM intervals").fetchall()[0][0] == len(
        _reference(tmp_path / "src")["intervals"]
    )


def test_s3_a_lock_put_applied_but_answered_with_an_error_is_recognised_as_ours(s3, bucket, config, tmp_path):  # noqa: F811
    build_corpus(tmp_path / "src", nodes=1, steps=1)
    store = f"s3://{bucket}/store"
    env = {**s3.env(), "PROFLAKE_LOCK_TEST_HOOKS": "lose:create"}
    done = run_cli(["ingest", str(tmp_path / "src"), "--store", store, "--json"], env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new_intervals"] > 0
    assert not _lock_exists(store, s3.env())  # released


def test_the_busy_message_says_when_the_lease_ends_with_a_date(tmp_path):
    store = Store(str(tmp_path / "store"))
    store.create()
    with StoreLock(store, purpose="the nightly run"):
        other = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(tmp_path), "--store", str(tmp_path / "store"),
                                "--allow-empty"],
                               capture_output=True, text=True, check=False)
    assert other.returncode == 4
    assert f"in use by the nightly run (pid {os.getpid()} on {socket.gethostname()}, lease ends 20" in other.stderr
    assert "UTC unless renewed" in other.stderr
