"""A reader's snapshot of the store (etl/proflake/store/snapshot.py): tables opened when a query first
names them, at the version each had when the snapshot was taken; small logs read without deltalake."""

from __future__ import annotations

from urllib.parse import unquote

import numpy as np
import pytest
from deltalake import DeltaTable
from helpers.prepared import PreparedFolder
from helpers.profiles import LEGACY, JobBuilder
from proflake.operations import ingest
from proflake.query.profiles import Profiles
from proflake.schema import ALL_TABLES
from proflake.store.compact import compact
from proflake.store.snapshot import FACT_TABLES, Snapshot, _file_spans, log_files, newest_version, tables_named
from proflake.store.store import Store


def _job(base, name: str):
    job = JobBuilder(base / name)
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    job.pyinstrument("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    return base / name


def _busy(folder) -> None:
    store = Store(folder / "store")
    ingest(str(LEGACY), store)
    source = _job(folder, "job-b")
    ingest(str(source), store)
    ingest(str(source), store, full_refresh=True)
    compact(store, retention_hours=0)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedFolder:
    return PreparedFolder(tmp_path_factory.mktemp("busy"), _busy)


@pytest.fixture
def busy_store(prepared) -> Store:
    """A store whose logs hold appends, replacements and a compaction's rewrites (adds and removes):
    built once for the module, a fresh copy for each test (helpers/prepared.py)."""
    return Store(prepared.fresh() / "store")


def test_a_small_log_read_directly_lists_what_deltalake_lists(busy_store):
    for name in ALL_TABLES:
        root = busy_store.table_uri(name)
        version = newest_version(root)
        table = DeltaTable(root, version=version)
        adds = log_files(root, version)
        assert adds is not None, name
        files = [f"{root}/{unquote(a['path'])}" for a in adds]
        assert files == table.file_uris(), name  # the same files, in the same order
        if name in FACT_TABLES:
            direct, by_deltalake = _file_spans(adds, files), _file_spans(table, files)
            np.testing.assert_array_equal(direct.min_start_time_us, by_deltalake.min_start_time_us)
            np.testing.assert_array_equal(direct.max_start_time_us, by_deltalake.max_start_time_us)
            assert direct.single_node == by_deltalake.single_node


def test_logs_beyond_the_plain_protocol_are_left_to_deltalake(busy_store, monkeypatch):
    root = busy_store.table_uri("intervals")
    version = newest_version(root)
    monkeypatch.setattr("proflake.store.snapshot.MAX_LOG_COMMITS", version)
    assert log_files(root, version) is None  # too many commits
    monkeypatch.undo()
    with open(f"{root}/_delta_log/_last_checkpoint", "w") as f:
        f.write("{}")
    assert log_files(root, version) is None  # a checkpoint


def test_tables_named_in_sql():
    assert tables_named("SELECT * FROM _function_stats_in($function_stats_files) -- batches") == {"function_stats", "intervals"}
    assert tables_named("FROM phase_function_stats JOIN manifest USING (interval_id)") == {"phase_function_stats", "intervals"}


def test_a_command_opens_only_the_tables_its_queries_read(busy_store):
    profiles = Profiles(busy_store)
    profiles.jobs()
    assert profiles._snapshot.opened == {"intervals"}
    profiles.by_step(0, job="job-b")
    assert profiles._snapshot.opened == {"intervals", "function_stats"}
    assert {"intervals", "batches", "function_callers"} <= {r["name"] for r in profiles.sql_schema().to_pylist()}


def test_tables_opened_later_are_read_at_the_snapshot_s_version(tmp_path, busy_store):
    profiles = Profiles(busy_store)
    before = profiles.by_step(0, job="job-b").table.to_pylist()
    versions = dict(profiles._snapshot.versions)
    ingest(str(_job(tmp_path, "job-c")), busy_store)  # new commits in every table
    # function_callers opens now, after the ingest: at the version it had when the snapshot was taken.
    edges = profiles.by_step(0, job="job-b").callers()
    assert profiles._snapshot.versions == versions
    root = busy_store.table_uri("function_callers")
    assert profiles._files["function_callers"].uris == DeltaTable(root, version=versions["function_callers"]).file_uris()
    assert newest_version(root) > versions["function_callers"]
    assert edges.num_rows > 0
    assert "job-c" not in profiles.job_ids()
    profiles.refresh()
    assert "job-c" in profiles.job_ids()
    assert profiles.by_step(0, job="job-b").table.to_pylist() == before


def test_a_snapshot_s_version_gone_from_the_log_is_a_stale_snapshot(busy_store):
    snapshot = Snapshot(busy_store)
    snapshot.versions["function_stats"] = 10_000  # a version the log does not hold (any more)
    with pytest.raises(Exception) as caught:
        snapshot.open(["function_stats"])
    from proflake.store.faults import is_vacuumed

    assert is_vacuumed(caught.value)



def test_listing_commands_answer_without_copying_intervals_and_fetches_answer_the_same(busy_store):
    """The fetch engine copies intervals into memory only for the questions that need the copy
    (selections by rowid, the intervals' columns): `jobs`, `nodes` and `batches` read its files (at 10^6
    intervals the copy cost each of them 1.2 s of CPU and ~600 MB). Every answer equals a connection that
    copies at once."""
    def kind(profiles: Profiles) -> str:
        con = profiles._con
        return con.sql("SELECT table_type FROM information_schema.tables WHERE table_name = 'intervals'").fetchall()[0][0]

    profiles = Profiles(busy_store.location)
    scope = {"all_jobs": True}
    listed = [profiles.jobs(), profiles.batches().drop_columns(["seconds"]), profiles.nodes(**scope)]
    assert kind(profiles) == "VIEW"
    fetched = [profiles.list_profile_stats(**scope), profiles.by_step(0, 10, **scope).table, profiles.by_time(0, 2e9, **scope).table,
               profiles.by_training_phase(**scope).table, profiles.pre_step_zero(**scope).table]
    assert kind(profiles) == "LOCAL TEMPORARY"
    profiles.close()
    con = Snapshot(busy_store).con  # copies at once, as every other connection does
    assert con.sql("SELECT table_type FROM information_schema.tables WHERE table_name = 'intervals'").fetchall()[0][0] == "LOCAL TEMPORARY"
    con.close()
    again = Profiles(busy_store.location)
    again.by_step(0, 10, **scope)  # the copy first, then the listings
    assert [again.jobs(), again.batches().drop_columns(["seconds"]), again.nodes(**scope)] == listed
    assert [again.list_profile_stats(**scope), again.by_step(0, 10, **scope).table, again.by_time(0, 2e9, **scope).table,
            again.by_training_phase(**scope).table, again.pre_step_zero(**scope).table] == fetched
    again.close()
