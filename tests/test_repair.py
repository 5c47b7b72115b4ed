"""``proflake check --repair`` restores what damage took from the store out of what the store and the
sources still hold (etl/proflake/ingestion/restore.py), or names what is lost and exits non-zero; it
never deletes the last copy of a row. Real stores, damaged on disk; "restored" means the store then
equals a clean ingest of the same sources (test_batches.snapshot)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers.prepared import PreparedFolder
from proflake.store.store import FACT_TABLES, Store, raw_view
from test_batches import build_corpus, snapshot
from test_check import _cli, _fresh, _setup


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedFolder:
    """test_check's corpus, store and clean snapshot (``_setup``), built once for the module."""
    return PreparedFolder(tmp_path_factory.mktemp("repair"), _setup)


def _raw_rows(store: Path) -> dict[str, int]:
    con = Store(store).connect()
    try:
        return {n: con.sql(f"SELECT count(*) FROM {raw_view(n)}").fetchall()[0][0] for n in FACT_TABLES}
    finally:
        con.close()


def _damage(victim: Path, how: str) -> None:
    if how == "lost":
        victim.unlink()
    else:  # zeroed: the same size, every byte 0
        victim.write_bytes(bytes(victim.stat().st_size))


def _restored(store: Path, clean: dict) -> str:
    repaired = _cli("check", "--repair", "--store", str(store))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "Traceback" not in repaired.stderr and "all repaired" in repaired.stderr
    assert snapshot(str(store)) == clean
    again = _cli("check", "--store", str(store))
    assert again.returncode == 0 and again.stdout == "", again.stdout
    return repaired.stdout


@pytest.mark.parametrize("how", ["lost", "zeroed"])
def test_a_lost_or_zeroed_intervals_file_is_parsed_again_from_its_source(prepared, how):
    _, store, clean = _fresh(prepared)
    _damage(Path(Store(store).delta("intervals").file_uris()[0]), how)
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "damage: bad_file: table 'intervals': data file" in found.stdout
    out = _restored(store, clean)
    assert "repaired: orphan_facts:" in out


def test_a_lost_intervals_file_whose_source_is_gone_is_named_as_lost_and_its_facts_are_kept(prepared, tmp_path):
    src, store, _ = _fresh(prepared)
    rows = _raw_rows(store)
    _damage(Path(Store(store).delta("intervals").file_uris()[0]), "zeroed")
    shutil.rmtree(src)
    repaired = _cli("check", "--repair", "--store", str(store))
    assert repaired.returncode == 1 and "Traceback" not in repaired.stderr
    assert "some cannot be repaired" in repaired.stderr
    lines = repaired.stdout.splitlines()
    assert any(line.startswith("damage: source_unreachable:") and repr(str(src)) in line for line in lines), lines
    lost = [line for line in lines if line.startswith("damage: lost_intervals:")]
    assert lost and all("job 'job-1'" in line for line in lost), lines
    assert {t for t in FACT_TABLES if any(f"table {t!r}" in line for line in lost)} == set(FACT_TABLES)
    assert _raw_rows(store) == rows  # nothing deleted: the facts are the last copy
    # Still damage on the next check, and another source's ingest leaves the kept rows alone.
    assert "damage: orphan_facts:" in _cli("check", "--store", str(store)).stdout
    other = tmp_path / "other"
    build_corpus(other / "x", nodes=1, steps=1)
    assert _cli("ingest", str(other / "x"), "--store", str(store)).returncode == 0
    after = _raw_rows(store)
    assert all(after[t] >= rows[t] for t in FACT_TABLES)
    assert _cli("check", "--repair", "--store", str(store)).returncode == 1


@pytest.mark.parametrize("table", FACT_TABLES)
def test_a_lost_fact_table_folder_is_parsed_again_from_its_source(prepared, table):
    src, store, clean = _fresh(prepared)
    shutil.rmtree(store / table)
    assert _cli("check", "--store", str(store)).returncode == 1
    out = _restored(store, clean)
    assert "repaired: interval_without_facts:" in out
    assert _cli("ingest", str(src), "--store", str(store)).returncode == 0
    assert snapshot(str(store)) == clean
    # The table created again is recorded from its own log, not followed on from the lost one's.
    _assert_checksums_follow_the_log(Store(store), [table])


def test_a_lost_intervals_folder_is_recovered_from_the_facts_and_the_sources(prepared):
    src, store, clean = _fresh(prepared)
    shutil.rmtree(store / "intervals")
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "no proflake store" not in found.stderr
    assert "damage: missing_table: table 'intervals' is missing" in found.stdout
    refused = _cli("ingest", str(src), "--store", str(store))
    assert refused.returncode == 1 and "proflake check" in refused.stderr
    _restored(store, clean)


@pytest.mark.parametrize("size", ["same", "other"])
def test_a_data_file_rewritten_after_its_commit_is_found_and_restored(prepared, size):
    _, store, clean = _fresh(prepared)
    victim = Path(Store(store).delta("function_stats").file_uris()[0])
    if size == "same":  # one byte of a data page: the footer still reads
        data = bytearray(victim.read_bytes())
        data[len(data) // 3] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:  # a valid Parquet file with other numbers
        rows = pq.read_table(victim)
        pq.write_table(rows.set_column(rows.schema.get_field_index("tottime"), "tottime", pc.multiply(rows["tottime"], 2.0)), victim)
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1
    assert any(line.startswith(f"damage: bad_file: table 'function_stats': data file {victim} changed after its commit")
               for line in found.stdout.splitlines()), found.stdout
    _restored(store, clean)
    assert not victim.exists() and victim.with_name(victim.name + ".damaged").exists()


def test_checksums_are_recorded_for_every_data_file_at_commit(prepared):
    _, store, _ = _fresh(prepared)
    from proflake.store.checksums import recorded

    st = Store(store)
    for name in ("intervals", "batches", *FACT_TABLES):
        files = {str(Path(u).relative_to(st.table_uri(name))) for u in st.delta(name).file_uris()}
        assert files and set(recorded(st, name)) == files, name


def test_checksums_follow_the_log_through_compaction(prepared):
    """A commit reads only the commits since the registry's note (etl/proflake/store/checksums.py): after a
    compaction (files removed and added) the registry still holds exactly the log's files, each with the
    digest of its bytes."""
    from proflake.store.checksums import digest, recorded
    from proflake.store.compact import compact

    _, store, _ = _fresh(prepared)
    st = Store(store)
    assert sum(t["files_removed"] for t in compact(st).tables.values())
    _assert_checksums_follow_the_log(st, ["intervals", "batches", *FACT_TABLES])
    for name in FACT_TABLES:
        for path, (size, blake2b) in recorded(st, name).items():
            full = Path(st.table_uri(name)) / path
            assert (full.stat().st_size, digest(str(full))) == (size, blake2b), path


def _assert_checksums_follow_the_log(st: Store, tables: list[str]) -> None:
    from proflake.store.checksums import recorded

    for name in tables:
        files = {str(Path(u).relative_to(st.table_uri(name))) for u in st.delta(name).file_uris()}
        assert files and set(recorded(st, name)) == files, name


def _tear_last_commit(log: Path) -> None:
    last = max(log.glob("0*.json"))
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])


def _lose_a_middle_commit(log: Path) -> None:
    commits = sorted(log.glob("0*.json"))
    assert len(commits) >= 3, "the corpus needs three commits for a gap"
    commits[1].unlink()


def _zero_the_checkpoint(log: Path) -> None:
    from deltalake import DeltaTable

    DeltaTable(str(log.parent)).create_checkpoint()
    (checkpoint,) = log.glob("*.checkpoint.parquet")
    checkpoint.write_bytes(bytes(checkpoint.stat().st_size))


@pytest.mark.parametrize(
    "table, damage, words",
    [
        ("function_stats", _tear_last_commit, "a commit file of its log is not valid JSON"),
        ("intervals", _tear_last_commit, "a commit file of its log is not valid JSON"),
        ("pyinstrument_frames", _lose_a_middle_commit, "its commit files jump from version 0 to 2"),
        ("batches", _zero_the_checkpoint, "its checkpoint (in _delta_log) cannot be read"),
    ],
    ids=["torn-fact-commit", "torn-intervals-commit", "commit-gap", "zeroed-checkpoint"],
)
def test_a_damaged_log_is_named_by_every_command_and_repaired_from_what_the_store_and_sources_hold(prepared, table, damage, words):
    src, store, clean = _fresh(prepared)
    assert _cli("ingest", str(src), "--store", str(store), "--full-refresh").returncode == 0  # a third commit
    damage(store / table / "_delta_log")
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "Traceback" not in found.stderr
    assert f"damage: damaged_log: table {table!r}: {words}" in found.stdout
    reader = {"function_stats": ["fetch", "by-step", "0", "9"], "intervals": ["jobs"], "batches": ["batches"],
              "pyinstrument_frames": ["fetch", "by-step", "0", "9", "--profiler", "pyinstrument"]}[table]
    for command in (reader, ["ingest", str(src), "--full-refresh"]):
        refused = _cli(*command, "--store", str(store))
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, (command, refused.stderr)
        errors = [line for line in refused.stderr.splitlines() if line.startswith("proflake: error:")]
        assert len(errors) == 1 and errors[0] == refused.stderr.strip().splitlines()[-1], refused.stderr
        assert f"table {table!r} of the store at" in errors[0] and "proflake check" in errors[0], errors[0]
        assert "ParsedLogPath" not in refused.stderr
    out = _restored(store, clean)
    assert f"repaired: damaged_log: table {table!r}" in out
    kept = list((store / "_proflake" / "damaged").iterdir())
    assert kept, "the damaged log was deleted, not set aside"
    if damage is _zero_the_checkpoint:  # the commits held the whole log: nothing was re-parsed
        assert "read from its commits" in out and "missing_table" not in out
