"""A local store's tables after the first of each name are created from deltalake's own creating commit,
renewed (etl/proflake/store/creation.py): the same table deltalake would create, with an id of its own."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from proflake.schema import ALL_TABLES, arrow_schema
from proflake.store import creation
from proflake.store.creation import FIRST_COMMIT
from proflake.store.store import Store


@pytest.fixture
def fresh_process(monkeypatch):
    """No creating commit remembered yet, as in a new process."""
    monkeypatch.setattr(creation, "_templates", {})


def _described(table: DeltaTable) -> dict:
    metadata = table.metadata()
    protocol = table.protocol()
    return {"name": metadata.name, "partition_columns": metadata.partition_columns,
            "configuration": metadata.configuration, "description": metadata.description,
            "schema": table.schema().to_arrow(), "version": table.version(),
            "protocol": (protocol.min_reader_version, protocol.min_writer_version, protocol.reader_features,
                         protocol.writer_features)}


def test_tables_made_from_the_remembered_commit_are_the_ones_deltalake_makes(tmp_path, fresh_process, monkeypatch):
    Store(str(tmp_path / "first")).create()  # through deltalake: remembered
    assert set(creation._templates) == {(name, arrow_schema(name).serialize().to_pybytes()) for name in ALL_TABLES}

    def refused(*args, **kwargs):
        raise AssertionError("deltalake was asked to create a table again")

    monkeypatch.setattr(DeltaTable, "create", refused)
    Store(str(tmp_path / "second")).create()
    monkeypatch.undo()
    ids = set()
    for name in ALL_TABLES:
        reference = DeltaTable.create(str(tmp_path / "reference" / name), schema=arrow_schema(name), name=name)
        made = DeltaTable(str(tmp_path / "second" / name))
        assert _described(made) == _described(reference), name
        assert made.to_pyarrow_table().num_rows == 0
        ids |= {made.metadata().id, DeltaTable(str(tmp_path / "first" / name)).metadata().id}
        (commit,) = (tmp_path / "second" / name / "_delta_log").iterdir()  # no temporary file left
        info = next(json.loads(line)["commitInfo"] for line in commit.read_text().splitlines() if "commitInfo" in line)
        assert info["operationParameters"]["location"] == (tmp_path / "second" / name).as_uri() + "/"
        assert json.loads(info["operationParameters"]["metadata"])["id"] == made.metadata().id
    assert len(ids) == 2 * len(ALL_TABLES)  # every table its own id


def test_a_table_that_appeared_meanwhile_is_left_as_it_is(tmp_path, fresh_process):
    Store(str(tmp_path / "first")).create()
    log = tmp_path / "second" / "intervals" / "_delta_log"
    log.mkdir(parents=True)
    theirs = (tmp_path / "first" / "intervals" / "_delta_log" / FIRST_COMMIT).read_bytes()
    (log / FIRST_COMMIT).write_bytes(theirs)  # another run created it first
    creation.create_local_table(log.parent, "intervals", arrow_schema("intervals"), lambda: pytest.fail("deltalake asked"))
    assert [p.name for p in log.iterdir()] == [FIRST_COMMIT] and (log / FIRST_COMMIT).read_bytes() == theirs


def test_a_commit_with_actions_it_does_not_know_is_not_remembered(tmp_path):
    commit = tmp_path / FIRST_COMMIT
    commit.write_text('{"protocol":{}}\n{"metaData":{}}\n{"add":{"path":"x.parquet"}}')
    assert creation._read_template(commit) is None
    commit.write_text('{"protocol":{}}\n{"metaData":{}}\n{"commitInfo":{}}')
    assert creation._read_template(commit) is not None
