"""The quarantine keeps its history: an entry whose file is gone from its source is closed (closed_at set),
not reported as open; a file that comes back reopens it; another source's entries are untouched; a store
written before closed_at existed reads it as NULL and gains it at the next ingest."""

from __future__ import annotations

import json
import subprocess
import sys

from deltalake import write_deltalake
from helpers.profiles import JobBuilder
from proflake import Profiles, ingest
from proflake.store.store import Store

GOOD = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"


def _job_with_a_bad_file(base):
    job = JobBuilder(base)
    job.cprofile("algo-1", GOOD.format(step=0, start=1000, end=2000))
    bad = job.stats_dir("cprofile", "algo-1", GOOD.format(step=1, start=2000, end=3000)) / "python_stats"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a marshal dump at all " * 10)
    return bad


def _errors(store, *extra: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "proflake.cli", "errors", "--store", str(store), "--format", "json", *extra],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_entry_closes_when_its_file_is_gone_and_reopens_when_it_returns(tmp_path):
    store = tmp_path / "store"
    bad = _job_with_a_bad_file(tmp_path / "a" / "job")
    other = _job_with_a_bad_file(tmp_path / "b" / "other")
    assert [f.kind for f in ingest(str(tmp_path / "a"), str(store)).failed] == ["cprofile"]
    assert len(ingest(str(tmp_path / "b"), str(store)).failed) == 1
    content = bad.read_bytes()
    bad.unlink()
    report = ingest(str(tmp_path / "a"), str(store))
    assert not report.failed
    # Open: only the other source's entry, which a run over the first source never closes.
    assert [e["source_uri"] for e in _errors(store)] == [str(other)]
    closed = [e for e in _errors(store, "--all") if e["source_uri"] == str(bad)]
    assert len(closed) == 1 and closed[0]["closed_at"] is not None and closed[0]["attempts"] == 1
    assert Profiles(str(store)).errors(include_closed=True).num_rows == 2
    # The file comes back, still bad: the entry reopens, one attempt more.
    bad.write_bytes(content)
    back = ingest(str(tmp_path / "a"), str(store))
    assert len(back.failed) == 1
    again = [e for e in _errors(store) if e["source_uri"] == str(bad)]
    assert len(again) == 1 and again[0]["closed_at"] is None and again[0]["attempts"] == 2


def test_a_store_written_before_closed_at_reads_it_as_null_and_gains_it(tmp_path):
    store = tmp_path / "store"
    bad = _job_with_a_bad_file(tmp_path / "a" / "job")
    ingest(str(tmp_path / "a"), str(store))
    # The quarantine as an older proflake wrote it: no closed_at column.
    table = Store(str(store)).delta("ingest_errors").to_pyarrow_table()
    old = table.drop_columns(["closed_at"])
    write_deltalake(Store(str(store)).table_uri("ingest_errors"), old, mode="overwrite", schema_mode="overwrite")
    assert "closed_at" not in Store(str(store)).delta("ingest_errors").schema().to_arrow().names
    rows = _errors(store)
    assert [(e["source_uri"], e["closed_at"]) for e in rows] == [(str(bad), None)]
    bad.unlink()
    ingest(str(tmp_path / "a"), str(store))
    assert "closed_at" in Store(str(store)).delta("ingest_errors").schema().to_arrow().names
    assert _errors(store) == []
    assert [e["closed_at"] is not None for e in _errors(store, "--all")] == [True]
