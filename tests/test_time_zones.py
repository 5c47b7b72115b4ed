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
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from helpers.profiles import JobBuilder
from proflake import ingest
from proflake.bi.catalog import build_catalog
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
    build_catalog(store, out["views"], register=False)
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
