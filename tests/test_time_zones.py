"""Answers that do not depend on the client's time zone (issue 32): every client proflake runs or hands a
connection to answers in UTC when its process runs under TZ=America/New_York.

The store holds one job of 30 train steps, each starting two minutes after the last, from 04:30 to 05:28
UTC on 2025-11-30; New York's midnight (05:00 UTC) falls between steps 14 and 15. In UTC the window
04:00-06:00 holds all 30 and they are all on 2025-11-30; a New York session reads the same text as 04:00-06:00
New York time (0 intervals) and puts the first 15 on 2025-11-29 (the control tests show both).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from helpers.profiles import JobBuilder
from helpers.same_answers import assert_same_table
from proflake import Profiles, ingest
from proflake.bi.catalog import build_catalog, init_sql_path
from proflake.store.store import Store

NEW_YORK = "America/New_York"
START_US = 1764477000_000000  # 2025-11-30T04:30:00Z
STEPS = 30
WINDOW = ("SELECT count(*) AS n FROM intervals "
          "WHERE start_time >= '2025-11-30 04:00:00' AND start_time < '2025-11-30 06:00:00'")
DAYS = "SELECT CAST(date_trunc('day', start_time) AS DATE) AS day, count(*) AS n FROM intervals GROUP BY 1 ORDER BY 1"
UTC_DAYS = [(dt.date(2025, 11, 30), STEPS)]
NEW_YORK_DAYS = [(dt.date(2025, 11, 29), 15), (dt.date(2025, 11, 30), 15)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    base = tmp_path_factory.mktemp("tz")
    job = JobBuilder(base / "jobs" / "overnight")
    for step in range(STEPS):
        start = START_US + step * 120_000_000
        job.cprofile("algo-1", f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 60_000_000}")
    ingest(str(base / "jobs"), str(base / "store"))
    return Store(str(base / "store"))


@pytest.fixture(scope="module")
def catalogs(store) -> dict[str, Path]:
    """A views catalog and a materialized one, each with its .init.sql."""
    folder = Path(store.root).parent / "bi"
    folder.mkdir()
    out = {"views": folder / "views.duckdb", "materialized": folder / "copy.duckdb"}
    build_catalog(store, out["views"], materialize=False, register=False)
    build_catalog(store, out["materialized"], materialize=True, register=False)
    return out


def answers(con) -> tuple[int, list[tuple]]:
    return con.execute(WINDOW).fetchall()[0][0], [tuple(r) for r in con.execute(DAYS).fetchall()]


def run_python(code: str, *args: str, zone: str = NEW_YORK) -> dict:
    """Run ``code`` in a fresh interpreter whose TZ is ``zone``; it prints one JSON object."""
    env = {**os.environ, "TZ": zone}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_store_straddles_new_york_midnight(catalogs):
    """The control: a DuckDB session in New York's zone, over the catalog without its .init.sql, answers
    differently; so every test below could fail."""
    con = duckdb.connect(str(catalogs["views"]), read_only=True)
    con.execute(f"SET TimeZone = '{NEW_YORK}'")
    assert answers(con) == (0, NEW_YORK_DAYS)
    con.execute("SET TimeZone = 'UTC'")
    assert answers(con) == (STEPS, UTC_DAYS)


# -- proflake's own connections ------------------------------------------------------------------------
@pytest.mark.parametrize("zone", [NEW_YORK, "UTC"])
def test_proflake_sql_answers_in_utc_whatever_the_processs_zone(store, zone):
    env = {**os.environ, "TZ": zone}
    out = []
    for query in (WINDOW, DAYS, "SELECT start_time FROM intervals WHERE start_step = 15"):
        done = subprocess.run([sys.executable, "-m", "proflake.cli", "sql", query, "--store", store.location,
                               "--format", "csv"], capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        out.append(done.stdout.splitlines())
    assert out == [['"n"', "30"], ['"day","n"', "2025-11-30,30"], ['"start_time"', "2025-11-30 05:00:00.000000Z"]]


def test_profiles_and_the_connections_it_hands_out_answer_in_utc_under_new_york(store):
    found = run_python("""
        import json, sys
        import duckdb
        from proflake import Profiles, Store
        W, D = sys.argv[2], sys.argv[3]
        local = duckdb.connect().execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
        profiles = Profiles(sys.argv[1])
        con = profiles.connection()
        mine = duckdb.connect()
        mine.execute("SET TimeZone = 'America/New_York'")
        handed_over = Store(sys.argv[1]).connect(mine)
        out = {"local": local, "zones": [c.execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
                                         for c in (con, con.cursor(), handed_over)]}
        out["sql"] = [profiles.sql(W).to_pylist(), [str(v) for v in profiles.sql(D)["day"].to_pylist()]]
        out["connection"] = [con.execute(W).fetchall()[0][0], handed_over.execute(W).fetchall()[0][0],
                             [str(r[0]) for r in handed_over.execute(D).fetchall()]]
        jobs = profiles.jobs()
        out["jobs"] = [str(jobs.schema.field("first_start_time").type), jobs["first_start_time"][0].as_py().isoformat()]
        print(json.dumps(out))
    """, store.location, WINDOW, DAYS)
    assert found["local"] == NEW_YORK  # DuckDB's own default in this process: what proflake overrides
    assert found["zones"] == ["UTC", "UTC", "UTC"]
    assert found["sql"] == [[{"n": STEPS}], ["2025-11-30"]]
    assert found["connection"] == [STEPS, STEPS, ["2025-11-30"]]
    assert found["jobs"] == ["timestamp[us, tz=UTC]", "2025-11-30T04:30:00+00:00"]


def test_a_connection_handed_to_the_store_in_another_zone_is_switched_to_utc(store):
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{NEW_YORK}'")
    con.execute(f"SET GLOBAL TimeZone = '{NEW_YORK}'")
    assert store.connect(con) is con
    assert answers(con) == (STEPS, UTC_DAYS)
    # A cursor is a session of its own (without the connection's temporary intervals): GLOBAL reaches it.
    cursor = con.cursor()
    assert cursor.execute("SELECT CAST(date_trunc('day', min(start_time)) AS DATE) FROM _intervals_files").fetchall() == [
        (dt.date(2025, 11, 30),)]


def test_another_zones_days_are_asked_for_by_converting_explicitly(store):
    """docs/sql-and-bi.md#time-zones: New York's days, on proflake's UTC connection, by saying so."""
    con = store.connect()
    assert con.execute("SELECT CAST(date_trunc('day', timezone('America/New_York', start_time)) AS DATE) AS day, "
                       "count(*) FROM intervals GROUP BY 1 ORDER BY 1").fetchall() == NEW_YORK_DAYS
    # A timestamp written with its offset means that instant in any session: 04:00-06:00 UTC, in New York time.
    assert con.execute("SELECT count(*) FROM intervals WHERE start_time >= '2025-11-29 23:00:00-05' "
                       "AND start_time < '2025-11-30 01:00:00-05'").fetchall() == [(STEPS,)]


# -- the BI catalog ------------------------------------------------------------------------------------
def duckdb_shell() -> str | None:
    beside = Path(sys.executable).parent / "duckdb"
    return str(beside) if beside.exists() else shutil.which("duckdb")


def shell(catalog: Path, *sql: str, init: bool = True) -> list[str]:
    args = [duckdb_shell(), "-readonly", "-csv"]
    if init:
        args += ["-cmd", f".read {init_sql_path(catalog)}"]
    args.append(str(catalog))
    for statement in sql:
        args += ["-c", statement]
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "TZ": NEW_YORK}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(duckdb_shell() is None, reason="no duckdb shell: pip install duckdb-cli (in the test extra)")
@pytest.mark.parametrize("kind", ["views", "materialized"])
def test_duckdb_shell_with_the_init_file_answers_in_utc_under_new_york(catalogs, kind):
    catalog = catalogs[kind]
    assert shell(catalog, WINDOW, DAYS) == ["n", "30", "day,n", "2025-11-30,30"]
    # Without the init file the shell answers in the process's zone: the .init.sql is what fixes it.
    assert shell(catalog, WINDOW, DAYS, init=False) == ["n", "0", "day,n", "2025-11-29,15", "2025-11-30,15"]
    args = [duckdb_shell(), "-readonly", "-cmd", f".read {init_sql_path(catalog)}", str(catalog),
            "-c", f"SET TimeZone = '{NEW_YORK}'"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "the configuration has been locked" in done.stdout + done.stderr


POOL = """
    import json, sys
    import sqlalchemy
    from proflake.bi.pool import on_connect
    catalog, W, D, listen = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "listen"
    url = sys.argv[5] if len(sys.argv) > 5 else f"duckdb:///{catalog}?access_mode=read_only"
    engine = sqlalchemy.create_engine(url, pool_size=3)
    if listen:
        sqlalchemy.event.listen(engine, "connect", on_connect(catalog))
    cons = [engine.connect() for _ in range(3)]  # three pooled connections at once, one database
    out = [[c.execute(sqlalchemy.text(W)).scalar(), [f"{r[0]}:{r[1]}" for r in c.execute(sqlalchemy.text(D))],
            c.execute(sqlalchemy.text("SELECT current_setting('TimeZone')")).scalar()] for c in cons]
    for c in cons:
        c.close()
    engine.dispose()
    print(json.dumps(out))
"""


def test_sqlalchemy_pool_with_on_connect_answers_in_utc_under_new_york(catalogs):
    pytest.importorskip("duckdb_engine")
    for kind in ("views", "materialized"):
        found = run_python(POOL, str(catalogs[kind]), WINDOW, DAYS, "listen")
        assert found == [[STEPS, ["2025-11-30:30"], "UTC"]] * 3, kind
    # Without the listener duckdb_engine answers in the process's zone: the listener is what fixes it.
    found = run_python(POOL, str(catalogs["views"]), WINDOW, DAYS, "no")
    assert found == [[0, ["2025-11-29:15", "2025-11-30:15"], NEW_YORK]] * 3


def test_superset_materialized_url_answers_in_utc_when_its_process_runs_in_utc(catalogs):
    """docs/sql-and-bi.md#time-zones: Superset's URL alone cannot set the zone (DuckDB refuses TimeZone as a
    connect option, and a locked configuration refuses it afterwards), so its server runs with TZ=UTC."""
    pytest.importorskip("duckdb_engine")
    catalog = catalogs["materialized"]
    url = f"duckdb:///{catalog}?access_mode=read_only&enable_external_access=false&lock_configuration=true"
    assert run_python(POOL, str(catalog), WINDOW, DAYS, "no", url, zone="UTC") == [[STEPS, ["2025-11-30:30"], "UTC"]] * 3
    assert run_python(POOL, str(catalog), WINDOW, DAYS, "no", url)[0][0] == 0  # the same URL in New York


def test_a_pool_locked_in_another_zone_is_refused(catalogs, tmp_path):
    """A database some other code locked down in New York time is refused, not quietly answered from."""
    from proflake.bi.pool import lock_down_connection
    from proflake.errors import ProflakeError

    copy = tmp_path / "copy.duckdb"
    shutil.copy(catalogs["materialized"], copy)
    con = duckdb.connect(str(copy), read_only=True)
    con.execute(f"SET GLOBAL TimeZone = '{NEW_YORK}'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    with pytest.raises(ProflakeError, match="locked in time zone 'America/New_York' instead of UTC"):
        lock_down_connection(con, [])


def test_catalog_init_file_sets_utc_before_locking(catalogs):
    statements = [line for line in init_sql_path(catalogs["views"]).read_text().splitlines() if not line.startswith("--")]
    assert statements[0] == "SET GLOBAL TimeZone = 'UTC';"
    assert statements[-1] == "SET lock_configuration = true;"


# -- Spark -----------------------------------------------------------------------------------------------
@pytest.fixture
def new_york_spark(spark):
    spark.conf.set("spark.sql.session.timeZone", NEW_YORK)
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


@pytest.mark.integration
def test_spark_profiles_answer_in_utc_on_a_new_york_session_and_leave_it_so(store, new_york_spark):
    from proflake.spark import SparkProfiles

    spark = new_york_spark
    # The control: the session's own zone moves the same SQL's answers.
    frame = spark.createDataFrame([(dt.datetime(2025, 11, 30, 4, 30, tzinfo=dt.timezone.utc),)], "start_time TIMESTAMP")
    assert [tuple(r) for r in frame.selectExpr("CAST(date_trunc('day', start_time) AS DATE)").collect()] == [
        (dt.date(2025, 11, 29),)]
    on_spark = SparkProfiles(spark, store.location)
    assert on_spark.sql(WINDOW).to_pylist() == [{"n": STEPS}]
    assert on_spark.sql(DAYS).to_pylist() == [{"day": dt.date(2025, 11, 30), "n": STEPS}]
    jobs, native = on_spark.jobs(), Profiles(store.location).jobs()
    assert jobs.schema.field("first_start_time").type == native.schema.field("first_start_time").type
    assert_same_table(jobs, native)
    assert spark.conf.get("spark.sql.session.timeZone") == NEW_YORK


@pytest.mark.integration
def test_spark_register_refuses_a_session_that_is_not_utc(store, new_york_spark):
    from proflake.errors import UsageError
    from proflake.spark import register

    spark = new_york_spark
    with pytest.raises(UsageError) as refused:
        register(spark, store.location)
    assert str(refused.value) == (
        "proflake's Spark views need spark.sql.session.timeZone=UTC, and this session's is 'America/New_York': "
        "run spark.conf.set('spark.sql.session.timeZone', 'UTC') first "
        "(or start Spark with --conf spark.sql.session.timeZone=UTC)"
    )
    assert refused.value.exit_code == 2
    spark.conf.set("spark.sql.session.timeZone", "Etc/UTC")  # Databricks' name for it
    register(spark, store.location)
    assert [tuple(r) for r in spark.sql(WINDOW).collect()] == [(STEPS,)]
    assert [tuple(r) for r in spark.sql(DAYS).collect()] == UTC_DAYS
    new_york_days = spark.sql("SELECT CAST(date_trunc('DAY', from_utc_timestamp(start_time, 'America/New_York')) AS DATE), "
                              "count(*) FROM intervals GROUP BY 1 ORDER BY 1")  # docs/sql-and-bi.md#time-zones
    assert [tuple(r) for r in new_york_days.collect()] == NEW_YORK_DAYS

