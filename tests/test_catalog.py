"""The BI catalog and the SQL surface's public contract: views and columns as documented, the docs'
worked queries, the DuckDB shell, SQLAlchemy (duckdb_engine), refresh after ingest and compaction, S3."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from helpers.profiles import FORMAT_SAMPLES, JobBuilder
from proflake import Profiles, ingest
from proflake.bi.catalog import build_catalog, init_sql_path, refresh_catalogs, registered_catalogs
from proflake.cli import cli
from proflake.docs import views_markdown
from proflake.errors import ExitCode
from proflake.operations import compact
from proflake.schema import ALL_TABLES, table_spec
from proflake.store.store import Store
from proflake.views import VIEWS, view_spec

ROOT = Path(__file__).resolve().parents[1]
SQL_DOC = (ROOT / "docs" / "sql-and-bi.md").read_text(encoding="utf-8")
VIEWS_DOC = (ROOT / "docs" / "reference" / "views.md").read_text(encoding="utf-8")
SQL_TYPES = {"VARCHAR": "string", "BIGINT": "int64", "DOUBLE": "float64", "BOOLEAN": "bool",
             "TIMESTAMP WITH TIME ZONE": "timestamp"}

# The docs' worked-query job: two nodes, hand-named intervals, the same real stats file in each.
T0 = 1764460800000000  # 2025-11-30T00:00:00Z in microseconds
STEP_MARKS = {"algo-1": [10.0, 11.2, 12.3, 13.5], "algo-2": [10.05, 11.6, 12.7, 13.8]}


def _us(seconds: float) -> int:
    return T0 + round(seconds * 1e6)


def build_readme_job(base: Path) -> Path:
    job = JobBuilder(base / "resnet50")
    for node, marks in STEP_MARKS.items():
        names = [f"prestepzero-*-start-{_us(0)}_train-0-stepstart-{_us(marks[0])}"]
        names += [f"train-{i}-stepstart-{_us(marks[i])}_train-{i}-stepend-{_us(marks[i + 1])}" for i in range(3)]
        names += [f"prestepzero-*-end-{_us(20)}_posthookclose-*-end-{_us(21)}"]
        for name in names:
            stats_dir = job.stats_dir("cprofile", node, name)
            stats_dir.mkdir(parents=True)
            shutil.copy(FORMAT_SAMPLES / "cprofile-py3.13.pstats", stats_dir / "python_stats")
    job.pyinstrument("algo-1", f"train-1-stepstart-{_us(11.2)}_train-1-stepend-{_us(12.3)}")
    return base / "resnet50"


@pytest.fixture(scope="module")
def readme_store(tmp_path_factory) -> Store:
    base = tmp_path_factory.mktemp("readme")
    ingest(str(build_readme_job(base / "jobs")), str(base / "store"))
    return Store(str(base / "store"))


@pytest.fixture(scope="module")
def catalog_file(readme_store) -> Path:
    out = Path(readme_store.root).parent / "bi" / "proflake.duckdb"
    out.parent.mkdir()
    result = CliRunner().invoke(cli, ["catalog", "--out", str(out), "--views", "--store", readme_store.location])
    assert result.exit_code == 0, result.stderr
    assert "wrote catalog" in result.stderr and "proflake.duckdb.init.sql" in result.stderr
    return out


_OPENED: list[duckdb.DuckDBPyConnection] = []


def open_catalog(path: Path) -> duckdb.DuckDBPyConnection:
    _OPENED.append(duckdb.connect(str(path), read_only=True))
    return _OPENED[-1]


@pytest.fixture(autouse=True)
def _close_opened():
    """Close the catalog connections a test opened when it ends: one left for the garbage collector keeps
    the file's DuckDB instance alive, and a later connection with other options (duckdb_engine's) fails
    with "a different configuration than existing connections", depending on when the collector ran."""
    yield
    while _OPENED:
        _OPENED.pop().close()


def described(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, str]]:
    return [(r[0], SQL_TYPES.get(r[1], r[1])) for r in con.execute(f"DESCRIBE {name}").fetchall()]


# -- what the catalog holds ------------------------------------------------------------------------
def test_catalog_holds_only_views_and_the_macros(catalog_file):
    con = open_catalog(catalog_file)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT internal").fetchall() == [(0,)]
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert views == set(ALL_TABLES) | {v.name for v in VIEWS}
    macros = {r[0] for r in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall()}
    assert {"in_scope", "step_end", "in_step_interval", "mode_rank", "job_phase_rank"} <= macros
    assert con.execute("SELECT job_phase_rank('finalization'), mode_rank('eval')").fetchall() == [(3, 2)]
    info = con.execute("SELECT store, mode, intervals_version FROM catalog_info").fetchall()
    assert info == [(con.execute("SELECT store FROM catalog_info").fetchall()[0][0], "views", 1)]
    con.close()
    lockdown = [line for line in init_sql_path(catalog_file).read_text().splitlines() if not line.startswith("--")]
    assert [line.split(" =")[0] for line in lockdown] == [
        "SET GLOBAL TimeZone", "SET allowed_directories", "SET enable_external_access", "SET lock_configuration"
    ]


def test_table_views_have_the_schema_columns_and_types(catalog_file, readme_store):
    con = open_catalog(catalog_file)
    live = readme_store.connect()
    for name in ALL_TABLES:
        declared = [(c.name, c.type_name) for c in table_spec(name).columns]
        assert described(con, name) == declared, name  # ingest_errors is empty here: the typed empty view
        assert described(live, name) == declared, name


def test_convenience_views_have_exactly_the_documented_columns(catalog_file, readme_store):
    """The public contract: a column changed in queries/views.sql fails here until VIEWS changes, and the
    reference page fails (tests/test_docs.py, cog --check) until it is regenerated from VIEWS (bin/docs)."""
    con = open_catalog(catalog_file)
    profiles = Profiles(readme_store)
    schema = profiles.sql_schema().to_pylist()
    for view in VIEWS:
        declared = [(n, t) for n, t, _ in view.columns]
        assert described(con, view.name) == declared, view.name
        if not view.catalog_only:
            seen = [(r["column_name"], SQL_TYPES.get(r["data_type"], r["data_type"])) for r in schema if r["name"] == view.name]
            assert seen == declared, view.name
    assert views_markdown() in VIEWS_DOC, "docs/reference/views.md is stale: run bin/docs"
    for name in ("intervals", "function_stats", "function_callers", "pyinstrument_frames", "batches"):
        assert f"`{name}`" in SQL_DOC


def test_catalog_answers_like_proflake_sql_and_the_fetch_methods(catalog_file, readme_store):
    con = open_catalog(catalog_file)
    profiles = Profiles(readme_store)
    for name in (*ALL_TABLES, *(v.name for v in VIEWS if not v.catalog_only)):
        query = f"SELECT count(*) AS n FROM {name}"
        assert con.execute(query).fetchall()[0][0] == profiles.sql(query).to_pylist()[0]["n"], name
    # A convenience view agrees with the fetch method it stands for.
    phases = profiles.by_job_phase().table.to_pylist()
    rows = con.execute(
        "SELECT job_phase, function, total_calls, primitive_calls, tottime FROM cprofile_by_job_phase"
    ).fetchall()
    assert {(r[0], r[1]): r[2:4] for r in rows} == {
        (p["job_phase"], p["function"]): (p["total_calls"], p["primitive_calls"]) for p in phases
    }
    step = profiles.by_step(1).table.to_pylist()
    rows = con.execute("SELECT function, total_calls, intervals FROM cprofile_by_step WHERE mode = 'train' AND step = 1").fetchall()
    assert {r[0]: (r[1], r[2]) for r in rows} == {s["function"]: (s["total_calls"], s["intervals"]) for s in step}
    py = profiles.by_step(1, profiler="pyinstrument").table.to_pylist()
    rows = con.execute("SELECT function, self_time, total_time FROM pyinstrument_by_step WHERE step = 1").fetchall()
    assert {r[0]: pytest.approx((r[1], r[2])) for r in rows} == {p["function"]: (p["self_time"], p["total_time"]) for p in py}


# -- the docs' worked queries -------------------------------------------------------------------
def readme_worked_queries() -> list[tuple[list[str], str]]:
    section = SQL_DOC.split("## Five worked queries", 1)[1].split("\n## ", 1)[0]
    examples = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.DOTALL):
        lines = block.splitlines()
        assert lines[0].startswith("$ proflake sql ")
        for end in range(1, len(lines) + 1):
            text = "\n".join(lines[:end])[2:].replace("\\\n", " ")
            try:
                args = shlex.split(text)
            except ValueError:
                continue
            if not text.endswith("\\"):
                break
        examples.append((args[1:], "\n".join(lines[end:]) + "\n"))
    return examples


def test_readme_worked_queries_print_what_the_readme_shows(readme_store, catalog_file):
    examples = readme_worked_queries()
    assert len(examples) == 5
    con = open_catalog(catalog_file)
    for args, expected in examples:
        result = CliRunner().invoke(cli, [*args, "--store", readme_store.location])
        assert result.exit_code == 0, (args, result.stderr)
        assert result.stdout == expected, args
        # The same SQL gives the same rows through the catalog.
        sql_args, params = args[1], {}
        for i, a in enumerate(args):
            if a == "--param":
                name, _, value = args[i + 1].partition("=")
                params[name] = value
        through_catalog = con.execute(sql_args, params or None).fetchall()
        through_sql = Profiles(readme_store).sql(sql_args, params)
        assert through_catalog == [tuple(r.values()) for r in through_sql.to_pylist()]


# -- other processes and tools ---------------------------------------------------------------------
def test_catalog_opens_read_only_in_a_separate_process(catalog_file):
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
        "print(con.execute('SELECT count(*) FROM intervals').fetchall()[0][0], "
        "con.execute('SELECT count(*) FROM step_node_skew').fetchall()[0][0])"
    )
    done = subprocess.run([sys.executable, "-c", code, str(catalog_file)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["11", "4"]


def duckdb_shell() -> str | None:
    beside = Path(sys.executable).parent / "duckdb"
    return str(beside) if beside.exists() else shutil.which("duckdb")


def shell(catalog: Path, *sql: str, lockdown: bool = True) -> subprocess.CompletedProcess:
    args = [duckdb_shell(), "-readonly", "-csv"]
    if lockdown:
        args += ["-cmd", f".read {init_sql_path(catalog)}"]
    args.append(str(catalog))
    for statement in sql:
        args += ["-c", statement]
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)


@pytest.mark.skipif(duckdb_shell() is None, reason="no duckdb shell: pip install duckdb-cli (in the test extra)")
def test_duckdb_shell_opens_the_catalog_and_the_lockdown_refuses_escapes(catalog_file, readme_store, tmp_path):
    done = shell(catalog_file, "SELECT count(*) AS n FROM function_stats", lockdown=False)
    assert done.returncode == 0, done.stderr
    done = shell(catalog_file, "SELECT step, node_id, wall_seconds FROM step_wall_time WHERE profiler = 'cprofile' "
                 "AND mode = 'train' ORDER BY step, node_id")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["step,node_id,wall_seconds", "0,algo-1,1.2", "0,algo-2,1.55"]
    for statement, message in (
        (f"COPY (SELECT * FROM intervals) TO '{tmp_path}/stolen.csv'", "Permission Error"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
        (f"ATTACH '{tmp_path}/other.duckdb'", "Permission Error"),
        ("INSTALL httpfs", "Permission Error"),
        ("SET threads = 1", "the configuration has been locked"),
        ("SET enable_external_access = true", "Cannot"),
        ("CREATE VIEW x AS SELECT 1", "read-only"),
    ):
        done = shell(catalog_file, statement)
        assert done.returncode != 0 and message in done.stdout + done.stderr, (statement, done.stdout, done.stderr)
    assert list(tmp_path.iterdir()) == []
    # The documented limit of a views catalog: DuckDB lets COPY write into a folder it may read.
    evil = Path(readme_store.root) / "intervals" / "copied-in.csv"
    done = shell(catalog_file, f"COPY (SELECT 1 AS x) TO '{evil}'")
    assert done.returncode == 0 and evil.exists(), done.stderr
    evil.unlink()


def test_sqlalchemy_duckdb_engine_reads_the_catalog_like_superset(catalog_file, readme_store, tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("duckdb_engine")
    engine = sqlalchemy.create_engine(f"duckdb:///{catalog_file}?access_mode=read_only")
    lockdown = init_sql_path(catalog_file).read_text()
    sqlalchemy.event.listen(engine, "connect", lambda con, _record: con.execute(lockdown))
    with engine.connect() as con:
        inspector = sqlalchemy.inspect(con)
        assert {v.name for v in VIEWS} | set(ALL_TABLES) <= set(inspector.get_view_names())
        columns = [c["name"] for c in inspector.get_columns("step_node_skew")]
        assert columns == view_spec("step_node_skew").column_names
        rows = con.execute(sqlalchemy.text(
            "SELECT node_id, count(*) AS steps FROM step_wall_time WHERE mode = :mode AND profiler = 'cprofile' "
            "GROUP BY node_id ORDER BY node_id"
        ), {"mode": "train"}).fetchall()
        assert [tuple(r) for r in rows] == [("algo-1", 3), ("algo-2", 3)]
        for statement in (f"COPY intervals TO '{tmp_path}/x.csv'", "SELECT * FROM read_csv('/etc/passwd')",
                          f"ATTACH '{tmp_path}/y.duckdb'", "INSTALL httpfs", "SET threads = 1"):
            with pytest.raises(sqlalchemy.exc.DBAPIError):
                con.execute(sqlalchemy.text(statement))
            con.rollback()
    engine.dispose()
    assert list(tmp_path.iterdir()) == []


def test_materialized_catalog_is_locked_down_by_its_url_alone(readme_store, tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("duckdb_engine")
    out = tmp_path / "bi" / "copy.duckdb"
    out.parent.mkdir()
    report = build_catalog(readme_store, out, materialize=True, register=False)
    assert report.mode == "materialized"
    con = open_catalog(out)
    assert {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()} == set(ALL_TABLES)
    con.close()
    url = f"duckdb:///{out}?access_mode=read_only&enable_external_access=false&lock_configuration=true"
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as con:
        assert con.execute(sqlalchemy.text("SELECT count(*) FROM call_paths")).scalar() > 0
        evil = Path(readme_store.root) / "intervals" / "evil.csv"
        for statement in (f"COPY intervals TO '{tmp_path}/x.csv'", f"COPY intervals TO '{evil}'",
                          "SELECT * FROM read_csv('/etc/passwd')", f"ATTACH '{tmp_path}/y.duckdb'",
                          "INSTALL httpfs", "SET threads = 1", "CREATE TABLE t (a INTEGER)"):
            with pytest.raises(sqlalchemy.exc.DBAPIError):
                con.execute(sqlalchemy.text(statement))
            con.rollback()
    engine.dispose()
    assert not evil.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bi"]


def _tree_digest(root: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.skipif(duckdb_shell() is None, reason="no duckdb shell: pip install duckdb-cli (in the test extra)")
def test_the_default_catalog_lets_no_client_write_any_file(readme_store, tmp_path):
    """The red team's overwrite (COPY ... TO a live Parquet file through the documented catalog) and every
    other way to write a file: refused by the default catalog (a copy), the store byte for byte the same."""
    out = tmp_path / "bi" / "proflake.duckdb"
    out.parent.mkdir()
    result = CliRunner().invoke(cli, ["catalog", "--out", str(out), "--no-register", "--store", readme_store.location])
    assert result.exit_code == 0 and "a copy of the store's data" in result.stderr, result.stderr
    store = Path(readme_store.root)
    before = _tree_digest(store)
    live = sorted((store / "function_stats").glob("*.parquet"))[0]
    temp = Path(os.environ.get("TMPDIR", "/tmp")) / f"proflake-{secrets.token_hex(4)}"
    for statements in (
        [f"COPY (SELECT * FROM function_stats) TO '{live}' (FORMAT parquet)"],
        [f"COPY (SELECT 1 AS x) TO '{store / 'intervals' / 'copied-in.csv'}'"],
        [f"COPY (SELECT 1 AS x) TO '{temp}.csv'"],
        [f"EXPORT DATABASE '{tmp_path / 'exported'}'"],
        [f"ATTACH '{tmp_path / 'other.duckdb'}' AS other", "CREATE TABLE other.t AS SELECT * FROM intervals"],
        ["CREATE TABLE t AS SELECT * FROM intervals"],
        ["SET temp_directory = '/tmp'"],
    ):
        done = shell(out, *statements)
        assert done.returncode != 0, (statements, done.stdout)
        assert "Error" in done.stdout + done.stderr, (statements, done.stdout, done.stderr)
    assert shell(out, "SELECT count(*) AS n FROM function_stats").returncode == 0  # it still answers
    assert _tree_digest(store) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bi"] and not Path(f"{temp}.csv").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["proflake.duckdb", "proflake.duckdb.init.sql"]


# -- refresh ---------------------------------------------------------------------------------------
@pytest.fixture
def growing(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    store = Store(str(tmp_path / "store"))
    ingest(str(tmp_path / "job"), store.location)
    out = tmp_path / "bi" / "proflake.duckdb"
    out.parent.mkdir()
    build_catalog(store, out, materialize=False)
    return job, store, out


def count(path: Path, table: str = "intervals") -> int:
    con = open_catalog(path)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    finally:
        con.close()


def catalog_files(path: Path) -> set[str]:
    con = open_catalog(path)
    try:
        text = " ".join(r[0] for r in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall())
    finally:
        con.close()
    return set(re.findall(r"'([^']+\.parquet)'", text))


def live_files(store: Store) -> set[str]:
    return {f for name in ALL_TABLES for f in store.delta(name).file_uris()}


def test_refresh_follows_ingest_and_compaction_and_never_names_deleted_files(growing, tmp_path):
    job, store, out = growing
    assert [e.path for e in registered_catalogs(store)] == [str(out)]
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    reader = open_catalog(out)  # a BI tool that opened the catalog before the ingest refreshed it
    ingest(str(tmp_path / "job"), store.location)
    assert reader.execute("SELECT count(*) FROM intervals").fetchall() == [(1,)]  # its snapshot, still readable
    reader.close()  # (DuckDB shares one open database per file within a process: close before reopening)
    assert count(out) == 2
    [report] = refresh_catalogs(store)  # an explicit refresh changes nothing more
    assert report.error is None and report.path == str(out)
    assert count(out) == 2
    # Compaction rewrites every file and (retention 0) deletes the old ones at once.
    compact(store, retention_hours=0)
    refresh_catalogs(store)
    assert catalog_files(out) <= live_files(store) and catalog_files(out)
    assert all(Path(f).exists() for f in catalog_files(out))
    assert count(out, "function_stats") == Profiles(store).sql("SELECT count(*) AS n FROM function_stats").to_pylist()[0]["n"]
    # Atomic writes leave nothing behind.
    assert sorted(p.name for p in out.parent.iterdir()) == ["proflake.duckdb", "proflake.duckdb.init.sql"]


def test_ingest_refreshes_registered_catalogs(growing, tmp_path):
    job, store, out = growing
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    ingest(str(tmp_path / "job"), store.location)
    assert count(out) == 2


def test_compact_refreshes_registered_catalogs_before_vacuuming(growing, tmp_path):
    job, store, out = growing
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    ingest(str(tmp_path / "job"), store.location)
    compact(store, retention_hours=0)
    assert count(out) == 2 and all(Path(f).exists() for f in catalog_files(out))


def test_cli_refresh_list_and_unregistering(growing, tmp_path):
    job, store, out = growing
    runner = CliRunner()
    listed = runner.invoke(cli, ["catalog", "--list", "--store", store.location])
    assert listed.exit_code == 0 and str(out) in listed.stdout and "views" in listed.stdout
    job.cprofile("algo-2", "train-0-stepstart-2000_train-0-stepend-3000", "b")
    ingest(str(tmp_path / "job"), store.location)
    result = runner.invoke(cli, ["catalog", "--refresh", "--store", store.location])
    assert result.exit_code == 0 and f"wrote catalog {out}" in result.stderr
    assert count(out) == 2
    out.unlink()
    result = runner.invoke(cli, ["catalog", "--refresh", "--store", store.location])
    assert result.exit_code == 0 and "no longer exists; unregistered" in result.stderr
    assert registered_catalogs(store) == []
    kept = tmp_path / "bi" / "private.duckdb"
    assert runner.invoke(cli, ["catalog", "--out", str(kept), "--no-register", "--store", store.location]).exit_code == 0
    assert kept.exists() and registered_catalogs(store) == []


def test_catalog_refuses_what_it_should(growing, tmp_path):
    _, store, out = growing
    runner = CliRunner()
    precious = tmp_path / "precious.duckdb"
    duckdb.connect(str(precious)).execute("CREATE TABLE keep AS SELECT 42 AS answer").close()
    result = runner.invoke(cli, ["catalog", "--out", str(precious), "--store", store.location])
    assert result.exit_code == ExitCode.USAGE and "is not a proflake catalog of this store" in result.stderr
    assert duckdb.connect(str(precious)).execute("SELECT * FROM keep").fetchall() == [(42,)]
    for args, message in (
        (["--out", str(tmp_path / "x.csv")], "ends in .duckdb"),
        (["--out", str(tmp_path / "nope" / "x.duckdb")], "does not exist"),
        ([], "exactly one of"),
        (["--out", str(out), "--refresh"], "exactly one of"),
    ):
        result = runner.invoke(cli, ["catalog", *args, "--store", store.location])
        assert result.exit_code in (ExitCode.FAILURE, ExitCode.USAGE) and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    result = runner.invoke(cli, ["catalog", "--out", str(tmp_path / "c.duckdb"), "--store", str(tmp_path / "none")])
    assert result.exit_code == ExitCode.FAILURE and "no proflake store" in result.stderr


# -- S3 --------------------------------------------------------------------------------------------
def test_s3_store_catalog_is_materialized_and_needs_no_httpfs(s3, tmp_path, monkeypatch):
    for key, value in s3.env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    bucket = f"bucket-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=bucket)
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    job.pyinstrument("algo-2", "train-0-stepstart-2000_train-0-stepend-2900")
    store = f"s3://{bucket}/warehouse"

    def proflake(*args: str):
        return CliRunner().invoke(cli, [*args, "--store", store])

    assert proflake("ingest", str(tmp_path / "job")).exit_code == 0
    out = tmp_path / "bi" / "s3.duckdb"
    out.parent.mkdir()
    done = proflake("catalog", "--out", str(out), "--views")
    assert done.exit_code == ExitCode.USAGE and "drop --views" in done.stderr and not out.exists()
    done = proflake("catalog", "--out", str(out))
    assert done.exit_code == 0, done.stderr
    # Another process, no network, no extension, nothing allowed outside the file: it still answers.
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True, "
        "config={'enable_external_access': False, 'autoload_known_extensions': False}); "
        "print(con.execute('SELECT count(*) FROM intervals').fetchall()[0][0], "
        "con.execute('SELECT count(*) FROM step_node_skew').fetchall()[0][0], "
        "con.execute('SELECT mode FROM catalog_info').fetchall()[0][0])"
    )
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=clean_env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2", "materialized"]
    # Registered in the store on S3, and refreshed from it.
    listed = proflake("catalog", "--list")
    assert str(out) in listed.stdout and "materialized" in listed.stdout
    registry = s3.client().get_object(Bucket=bucket, Key="warehouse/_proflake/catalogs.json")["Body"].read()
    assert [c["path"] for c in json.loads(registry)["catalogs"]] == [str(out)]
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    assert proflake("ingest", str(tmp_path / "job")).exit_code == 0
    done = proflake("catalog", "--refresh")
    assert done.exit_code == 0, done.stderr
    assert count(out) == 3
