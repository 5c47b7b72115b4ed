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
from proflake.store.store import FACT_TABLES, Store, raw_view
from test_batches import build_corpus, snapshot
from test_check import _cli, _setup


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
def test_a_lost_or_zeroed_intervals_file_is_parsed_again_from_its_source(tmp_path, how):
    _, store, clean = _setup(tmp_path)
    _damage(Path(Store(store).delta("intervals").file_uris()[0]), how)
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "damage: bad_file: table 'intervals': data file" in found.stdout
    out = _restored(store, clean)
    assert "repaired: orphan_facts:" in out


def test_a_lost_intervals_file_whose_source_is_gone_is_named_as_lost_and_its_facts_are_kept(tmp_path):
    src, store, _ = _setup(tmp_path)
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
def test_a_lost_fact_table_folder_is_parsed_again_from_its_source(tmp_path, table):
    src, store, clean = _setup(tmp_path)
    shutil.rmtree(store / table)
    assert _cli("check", "--store", str(store)).returncode == 1
    out = _restored(store, clean)
    assert "repaired: interval_without_facts:" in out
    assert _cli("ingest", str(src), "--store", str(store)).returncode == 0
    assert snapshot(str(store)) == clean


def test_a_lost_intervals_folder_is_recovered_from_the_facts_and_the_sources(tmp_path):
    src, store, clean = _setup(tmp_path)
    shutil.rmtree(store / "intervals")
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "no proflake store" not in found.stderr
    assert "damage: missing_table: table 'intervals' is missing" in found.stdout
    refused = _cli("ingest", str(src), "--store", str(store))
    assert refused.returncode == 1 and "proflake check" in refused.stderr
    _restored(store, clean)


@pytest.mark.parametrize("size", ["same", "other"])
def test_a_data_file_rewritten_after_its_commit_is_found_and_restored(tmp_path, size):
    _, store, clean = _setup(tmp_path)
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


def test_checksums_are_recorded_for_every_data_file_at_commit(tmp_path):
    _, store, _ = _setup(tmp_path)
    from proflake.store.checksums import recorded

    st = Store(store)
    for name in ("intervals", "batches", *FACT_TABLES):
        files = {str(Path(u).relative_to(st.table_uri(name))) for u in st.delta(name).file_uris()}
        assert files and set(recorded(st, name)) == files, name
