"""proflake sql and Profiles.sql: read-only, bound parameters, one-line errors, every output, the schema."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers.profiles import LEGACY, JobBuilder
from proflake import Profiles, ingest
from proflake.cli import cli
from proflake.errors import ExitCode, QueryError, ReadOnlyError

READ_ONLY = "proflake sql runs read-only: "


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("sql")
    job = JobBuilder(base / "jobs" / "sql-job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    job.cprofile("algo-2", "train-0-stepstart-2000_train-0-stepend-3500", "b")
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "c")
    job.pyinstrument("algo-1", "train-2-stepstart-4000_train-2-stepend-5000")
    ingest(str(base / "jobs" / "sql-job"), str(base / "store"))
    return str(base / "store")


@pytest.fixture(scope="module")
def profiles(store) -> Profiles:
    return Profiles(store)


def run(args: list[str], store: str, **kwargs):
    return CliRunner().invoke(cli, ["sql", *args, "--store", store], **kwargs)


def _refusals(store: str, outside: str) -> list[tuple[str, str]]:
    return [
        (f"COPY (SELECT * FROM intervals) TO '{outside}/stolen.csv'", "COPY"),
        (f"COPY (SELECT 1 AS x) TO '{store}/intervals/evil.parquet' (FORMAT parquet)", "COPY"),
        (f"COPY intervals TO '{store}/function_stats/evil.csv'", "COPY"),
        (f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{store}/intervals/evil.csv'", "EXPLAIN ANALYZE of COPY"),
        (f"EXPORT DATABASE '{outside}/export'", "EXPORT DATABASE"),
        (f"ATTACH '{outside}/other.duckdb' AS other", "ATTACH"),
        ("DETACH other", "DETACH"),
        ("INSTALL httpfs", "INSTALL"),
        ("LOAD httpfs", "LOAD"),
        ("SET threads = 1", "SET"),
        ("SET enable_external_access = true", "SET"),
        ("RESET threads", "RESET"),
        ("SET VARIABLE x = 1", "SET"),
        ("USE memory", "USE"),
        ("PRAGMA threads = 1", "PRAGMA threads"),
        ("PRAGMA enable_profiling", "PRAGMA enable_profiling"),
        ("CREATE TABLE t AS SELECT * FROM intervals", "CREATE TABLE"),
        ("CREATE OR REPLACE TEMP TABLE t AS SELECT 1", "CREATE TEMP TABLE"),
        ("CREATE OR REPLACE VIEW intervals AS SELECT 1", "CREATE VIEW"),
        ("CREATE MACRO evil(x) AS x", "CREATE MACRO"),
        ("INSERT INTO batches SELECT * FROM batches", "INSERT"),
        ("UPDATE intervals SET node_id = 'x'", "UPDATE"),
        ("DELETE FROM intervals", "DELETE"),
        ("DROP VIEW intervals", "DROP VIEW"),
        ("CALL pragma_version()", "CALL"),
        ("CHECKPOINT", "CHECKPOINT"),
        ("BEGIN TRANSACTION", "BEGIN"),
        ("SELECT * FROM checkpoint()", "checkpoint()"),
        ("SELECT * FROM enable_profiling()", "enable_profiling()"),
        ("SELECT * FROM query('SELECT 1')", "query()"),
        ("PIVOT intervals ON node_id", "PIVOT without an IN (...) list"),
        ("/* comment first */ COPY (SELECT 1) TO 'x.csv'", "COPY"),
    ]


def test_every_write_or_state_change_is_refused_in_one_line_via_the_cli(store, tmp_path):
    for query, what in _refusals(store, str(tmp_path)):
        result = run([query], store)
        assert result.exit_code == ExitCode.FAILURE, (query, result.output)
        assert result.stdout == ""
        assert result.stderr.startswith(f"proflake: error: {READ_ONLY}{what} is not allowed ("), (query, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []
    assert not [p for p in Path(store).rglob("evil*")]


def test_every_write_or_state_change_is_refused_via_profiles_sql(store, profiles, tmp_path):
    for query, what in _refusals(store, str(tmp_path)):
        with pytest.raises(ReadOnlyError) as caught:
            profiles.sql(query)
        assert str(caught.value).startswith(f"{READ_ONLY}{what} is not allowed"), query
    assert list(tmp_path.iterdir()) == []
    assert not [p for p in Path(store).rglob("evil*")]
    assert profiles.sql("SELECT count(*) AS n FROM intervals").to_pylist() == [{"n": 4}]  # still usable


def test_reading_outside_the_store_is_refused_by_duckdb(store, profiles, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    for query in (
        "SELECT * FROM read_csv('/etc/passwd')",
        f"SELECT * FROM read_csv('{secret}')",
        f"SELECT * FROM read_text('{secret}')",
        f"SELECT * FROM read_parquet('{store}/../outside.parquet')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_parquet('https://example.com/x.parquet')",
    ):
        result = run([query], store)
        assert result.exit_code == ExitCode.FAILURE and result.stdout == "", query
        assert result.stderr.startswith("proflake: error: Permission Error:"), (query, result.stderr)
        assert "disabled by configuration" in result.stderr and result.stderr.count("\n") == 1
        with pytest.raises(QueryError, match="Permission Error"):
            profiles.sql(query)


def test_queries_of_every_read_kind_run(store, profiles):
    for query in (
        "SELECT count(*) FROM function_stats",
        "WITH n AS (SELECT DISTINCT node_id FROM intervals) SELECT * FROM n",
        "FROM intervals SELECT node_id",
        "VALUES (1, 'a')",
        "DESCRIBE intervals",
        "SHOW TABLES",
        "SUMMARIZE SELECT tottime FROM function_stats",
        "EXPLAIN SELECT * FROM intervals",
        "PIVOT (SELECT node_id, start_step FROM intervals) ON node_id IN ('algo-1', 'algo-2') USING count(*)",
        "PRAGMA show_tables",
        "SELECT * FROM pragma_table_info('intervals')",
        f"SELECT count(*) FROM read_parquet('{store}/intervals/*.parquet')",  # inside the store: allowed
        "SELECT count(*) FROM step_wall_time",
        "-- a comment\nSELECT 1;\n",
    ):
        assert profiles.sql(query).num_rows >= 1, query


def test_parameters_are_bound_never_pasted(store, profiles):
    query = "SELECT count(*) AS n FROM intervals WHERE node_id = $node"
    assert profiles.sql(query, {"node": "algo-1"}).to_pylist() == [{"n": 3}]
    # An injection attempt is just a value that matches nothing.
    assert profiles.sql(query, {"node": "x' OR '1'='1"}).to_pylist() == [{"n": 0}]
    assert profiles.sql(query, {"node": "algo-1'; COPY intervals TO 'x.csv'; --"}).to_pylist() == [{"n": 0}]
    result = run([query, "--param", "node=algo-2", "--format", "json"], store)
    assert result.exit_code == 0 and json.loads(result.stdout) == [{"n": 1}]
    result = run(["SELECT CAST($step AS BIGINT) + 1 AS next", "--param", "$step=41", "--format", "csv"], store)
    assert result.stdout.splitlines() == ['"next"', "42"]


def test_parameter_mistakes_are_one_clear_line(store, profiles):
    result = run(["SELECT $a AS a, $b AS b", "--param", "a=1"], store)
    assert result.exit_code == ExitCode.FAILURE
    assert result.stderr == "proflake: error: the query needs a value for $b (--param b=VALUE)\n"
    result = run(["SELECT 1", "--param", "a=1"], store)
    assert result.stderr == "proflake: error: parameter(s) $a not used by the query\n"
    result = run(["SELECT 1", "--param", "novalue"], store)
    assert result.exit_code == ExitCode.USAGE and "is not NAME=VALUE" in result.stderr
    with pytest.raises(QueryError, match="named parameters"):
        profiles.sql("SELECT ?", {"1": 1})


def test_bad_queries_fail_in_one_line_with_duckdbs_position(store):
    result = run(["SELECT node_id,\n       nodeid FROM intervals"], store)
    assert result.exit_code == ExitCode.FAILURE and result.stdout == ""
    assert result.stderr.startswith('proflake: error: Binder Error: Referenced column "nodeid" not found')
    assert result.stderr.rstrip().endswith('(at line 2, column 8, near "nodeid FROM intervals")')
    assert result.stderr.count("\n") == 1
    result = run(["SELECT * FROM\nintervals WHERE WHERE"], store)
    assert result.stderr == 'proflake: error: Parser Error: syntax error at or near "WHERE" (at line 2, column 17, near "WHERE")\n'
    result = run(["SELECT * FROM no_such_table"], store)
    assert result.stderr.startswith("proflake: error: Catalog Error: Table with name no_such_table does not exist!")
    assert "(at line 1, column 15" in result.stderr and result.stderr.count("\n") == 1
    result = run(["SELECT CAST('x' AS INTEGER)"], store)
    assert result.stderr.startswith("proflake: error: Conversion Error:") and "(at line 1, column 8" in result.stderr
    result = run(["SELECT 1; SELECT 2"], store)
    assert result.stderr == "proflake: error: proflake sql runs one query at a time; this text holds 2 statements\n"
    result = run([" "], store)
    assert result.exit_code == ExitCode.FAILURE and result.stderr == "proflake: error: the query is empty\n"


def test_query_from_text_file_and_stdin_in_every_format(store, tmp_path):
    query = "SELECT node_id, count(*) AS n FROM intervals GROUP BY node_id ORDER BY node_id"
    result = run([query], store)
    assert result.stdout.splitlines() == ["node_id  n", "-------  -", "algo-1   3", "algo-2   1"]
    path = tmp_path / "q.sql"
    path.write_text(query + ";\n")
    result = run([str(path), "--format", "csv"], store)
    assert result.stdout.splitlines() == ['"node_id","n"', '"algo-1",3', '"algo-2",1']
    result = run(["-", "--format", "json"], store, input=query)
    assert json.loads(result.stdout) == [{"node_id": "algo-1", "n": 3}, {"node_id": "algo-2", "n": 1}]
    out = tmp_path / "out.parquet"
    result = run([query, "--format", "parquet", "--output", str(out)], store)
    assert result.exit_code == 0 and result.stdout == "" and "wrote 2 row(s)" in result.stderr
    assert pq.read_table(out).to_pylist() == [{"node_id": "algo-1", "n": 3}, {"node_id": "algo-2", "n": 1}]
    result = run([str(tmp_path / "missing.sql")], store)
    assert result.exit_code == ExitCode.FAILURE and "cannot read query file" in result.stderr
    result = CliRunner().invoke(cli, ["sql", "--store", store])
    assert result.exit_code == ExitCode.USAGE and "missing QUERY" in result.stderr


def test_schema_lists_tables_and_views_with_columns_and_types(store, profiles):
    result = run(["--schema", "--format", "json"], store)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    by_name: dict[str, list] = {}
    for r in rows:
        by_name.setdefault(r["name"], []).append(r)
    assert {"intervals", "function_stats", "function_callers", "pyinstrument_frames", "batches", "manifest",
            "step_wall_time", "call_paths", "top_functions"} <= set(by_name)
    assert not [n for n in by_name if n.startswith("_")]
    first = by_name["intervals"][0]
    assert (first["kind"], first["position"], first["column_name"], first["data_type"]) == ("table", 1, "interval_id", "VARCHAR")
    assert by_name["function_stats"][0]["kind"] == "view"
    assert ("wall_seconds", "DOUBLE") in {(r["column_name"], r["data_type"]) for r in by_name["step_wall_time"]}
    text = run(["--schema"], store)
    assert text.stdout.splitlines()[0].split() == ["name", "kind", "position", "column_name", "data_type"]
    assert run(["--schema", "SELECT 1"], store).exit_code == ExitCode.USAGE
    assert profiles.sql_schema().num_rows == len(rows)


def test_profiles_sql_follows_refresh(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    ingest(str(tmp_path / "job"), str(tmp_path / "store"))
    profiles = Profiles(str(tmp_path / "store"))
    assert profiles.sql("SELECT count(*) AS n FROM intervals").to_pylist() == [{"n": 1}]
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000")
    profiles.ingest(str(tmp_path / "job"))  # refreshes
    assert profiles.sql("SELECT count(*) AS n FROM intervals").to_pylist() == [{"n": 2}]


def test_legacy_store_sql_still_works(tmp_path):
    ingest(str(LEGACY), str(tmp_path / "store"))
    table = Profiles(str(tmp_path / "store")).sql(
        "SELECT count(*) AS n FROM function_stats WHERE start_step = CAST($step AS BIGINT)", {"step": "2"}
    )
    assert table.to_pylist() == [{"n": 293}]


# -- S3 ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_store(s3, tmp_path_factory):
    """A store on the session's S3 server (conftest's ``s3``), its settings in the environment."""
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")}
    os.environ.update({k: v for k, v in s3.env().items() if k.startswith("AWS_")})
    bucket = f"bucket-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=bucket)
    base = tmp_path_factory.mktemp("s3sql")
    job = JobBuilder(base / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    job.pyinstrument("algo-1", "train-1-stepstart-3000_train-1-stepend-4000")
    store = f"s3://{bucket}/warehouse"
    ingest(str(base / "job"), store)
    yield store
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_s3_store_answers_sql_on_the_locked_connection(s3_store, tmp_path):
    profiles = Profiles(s3_store)
    assert profiles.sql("SELECT count(*) AS n FROM intervals").to_pylist() == [{"n": 2}]
    assert profiles.sql("SELECT count(*) AS n FROM call_paths").to_pylist()[0]["n"] > 0
    assert profiles.sql("SELECT current_setting('enable_external_access') AS e").to_pylist() == [{"e": False}]
    with pytest.raises(ReadOnlyError, match="COPY is not allowed"):
        profiles.sql(f"COPY intervals TO '{tmp_path}/x.csv'")
    with pytest.raises(QueryError, match="Permission Error"):
        profiles.sql("SELECT * FROM read_csv('/etc/passwd')")
    with pytest.raises(QueryError, match="Permission Error"):
        profiles.sql(f"SELECT * FROM read_parquet('{s3_store}/intervals/*.parquet')")
    result = CliRunner().invoke(cli, ["sql", "--schema", "--store", s3_store, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert "step_node_skew" in {r["name"] for r in json.loads(result.stdout)}
    assert list(tmp_path.iterdir()) == []
