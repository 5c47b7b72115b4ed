"""The BI recipes of docs/sql-and-bi.md as written: Superset's ``superset_config.py`` (run from the doc,
on SQLAlchemy engines for SQLite and DuckDB: only DuckDB connections to the catalog are locked down), and
integer sums that reach Python as ``int``, not ``Decimal``: every integer column of every view is BIGINT
or smaller, never HUGEINT (DuckDB's type for ``sum`` of a BIGINT)."""

from __future__ import annotations

import decimal
import re
import threading
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from proflake.cli import cli
from proflake.store.store import Store
from test_catalog import readme_store  # noqa: F401 - a fixture

sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("duckdb_engine")

DOCS = Path(__file__).resolve().parent.parent / "docs" / "sql-and-bi.md"
SMALL_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}


def superset_config() -> str:
    """The ```python block under the superset_config.py marker of docs/sql-and-bi.md, unindented."""
    text = DOCS.read_text(encoding="utf-8")
    after = text[text.index("<!-- superset_config.py:"):]
    block = re.search(r"```python\n(.*?)\n\s*```", after, re.S).group(1)
    return "\n".join(line[2:] if line.startswith("  ") else line for line in block.splitlines())


@pytest.fixture(scope="module")
def views_catalog(readme_store) -> Path:  # noqa: F811
    out = Path(readme_store.root).parent / "recipes" / "proflake.duckdb"
    out.parent.mkdir()
    done = CliRunner().invoke(cli, ["catalog", "--out", str(out), "--views", "--no-register", "--store", readme_store.location])
    assert done.exit_code == 0, done.stderr
    return out


def locked(con) -> bool:
    return str(con.exec_driver_sql("SELECT current_setting('lock_configuration')").scalar()).lower() == "true"


def test_the_superset_config_locks_down_the_catalog_and_nothing_else(views_catalog, tmp_path, monkeypatch):
    from sqlalchemy.engine import Engine

    source = superset_config()
    assert '"/srv/bi/proflake.duckdb"' in source and "event.listen(Engine, \"connect\"" in source
    monkeypatch.setenv("SUPERSET_SECRET_KEY", "test")
    namespace: dict = {}
    exec(compile(source.replace("/srv/bi/proflake.duckdb", str(views_catalog)), "superset_config.py", "exec"), namespace)
    assert namespace["SECRET_KEY"] == "test"
    engines: list = []
    try:
        # Superset's metadata database (SQLite) works: the listener leaves it alone.
        meta = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'superset.db'}")
        engines.append(meta)
        with meta.begin() as con:
            con.exec_driver_sql("CREATE TABLE dashboards (id INTEGER PRIMARY KEY, title TEXT)")
            con.exec_driver_sql("INSERT INTO dashboards (title) VALUES ('steps')")
        with meta.connect() as con:
            assert con.exec_driver_sql("SELECT title FROM dashboards").scalar() == "steps"
        # Another DuckDB database is not the catalog: not locked.
        other = sqlalchemy.create_engine(f"duckdb:///{tmp_path / 'other.duckdb'}")
        engines.append(other)
        with other.connect() as con:
            assert not locked(con)
            con.exec_driver_sql("SET threads = 1")
        # The catalog: every pooled connection, four at once, is locked down in UTC and refuses escapes.
        engine = sqlalchemy.create_engine(f"duckdb:///{views_catalog}?access_mode=read_only", pool_size=4, max_overflow=0)
        engines.append(engine)
        barrier, answers = threading.Barrier(4), []

        def client() -> None:
            try:
                with engine.connect() as con:
                    barrier.wait(timeout=30)
                    zone = con.exec_driver_sql("SELECT current_setting('TimeZone')").scalar()
                    rows = con.exec_driver_sql("SELECT count(*) FROM step_wall_time").scalar()
                    is_locked = locked(con)
                    try:
                        con.exec_driver_sql("SELECT * FROM read_csv('/etc/passwd')")
                        answers.append("escaped")
                    except sqlalchemy.exc.DBAPIError:
                        con.rollback()
                        answers.append((is_locked, zone, rows))
            except Exception as e:  # noqa: BLE001
                answers.append(e)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(answers) == 4 and all(a == answers[0] for a in answers), answers
        assert answers[0][:2] == (True, "UTC") and answers[0][2] > 0
    finally:
        sqlalchemy.event.remove(Engine, "connect", namespace["proflake_lock_down"])
        for made in engines:
            made.dispose()


def test_a_listener_that_locks_down_whatever_connects_breaks_superset_s_sqlite(views_catalog, tmp_path):
    """Why the recipe's listener filters: on_connect registered on every engine reaches SQLite too."""
    from proflake.bi.pool import on_connect
    from sqlalchemy.engine import Engine

    listener = on_connect(views_catalog)
    sqlalchemy.event.listen(Engine, "connect", listener)
    try:
        meta = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'superset.db'}")
        with pytest.raises(sqlalchemy.exc.OperationalError, match="no such function: current_setting"):
            meta.connect()
        meta.dispose()
    finally:
        sqlalchemy.event.remove(Engine, "connect", listener)


def views(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]


def integer_types(con, relation: str) -> dict[str, str]:
    return {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall() if "INT" in r[1] or r[1].startswith("DECIMAL")}


def test_every_integer_column_of_every_view_is_bigint_or_smaller_and_reaches_python_as_int(views_catalog, readme_store):  # noqa: F811
    con = duckdb.connect(str(views_catalog), read_only=True)
    con.execute(views_catalog.with_name(views_catalog.name + ".init.sql").read_text())
    names = views(con)
    assert {"step_wall_time", "cprofile_by_job_phase", "pyinstrument_by_step", "top_functions", "trend_series"} <= set(names)
    store_con = Store(readme_store.location).connect()
    relations = [(con, n) for n in names] + [(store_con, n) for n in views(store_con)]
    jobs = con.execute("SELECT min(job_id), max(job_id) FROM intervals").fetchone()
    relations.append((con, f"profile_diff('{jobs[0]}', '{jobs[1]}')"))  # the table macro
    checked = 0
    for c, relation in relations:
        wide = {col: t for col, t in integer_types(c, relation).items() if t not in SMALL_INTEGERS}
        assert wide == {}, relation
        rows = c.execute(f"SELECT * FROM {relation} LIMIT 200").fetchall()
        assert not any(isinstance(v, decimal.Decimal) for row in rows for v in row), relation
        checked += bool(rows)
    assert checked >= 10  # most views hold rows on this store, so the values were looked at


def test_a_pyinstrument_frame_whose_children_round_to_more_than_it_gets_self_time_0():
    """docs/fetch-methods.md: pyinstrument writes times with 6 decimals, so a frame's children can sum to a
    hair more than the frame; its self time is clamped at 0 by the reader (readers/pyinstrument.py), and the
    stored column, the roll-ups and the call tree never see a negative own time."""
    import json

    from proflake.readers.pyinstrument import read_pyinstrument

    def frame(name: str, time: float, children: list) -> dict:
        return {"function": name, "file_path": "/app/train.py", "line_no": 1, "time": time, "children": children}

    leaves = [frame("a", 0.100001, []), frame("b", 0.200001, [])]  # 0.300002 under a parent of 0.3
    session = {"start_time": 1.7e9, "duration": 0.5, "sample_count": 10, "program": "train.py",
               "root_frame": frame("main", 0.5, [frame("step", 0.3, leaves), frame("log", 0.2, [])])}
    rows = {r["function_name"]: r for r in read_pyinstrument(json.dumps(session).encode()).frames.to_pylist()}
    assert rows["step"]["self_time"] == 0.0  # 0.3 - 0.300002 would be -2 µs
    assert rows["main"]["self_time"] == 0.0 and rows["log"]["self_time"] == 0.2
    assert all(r["self_time"] >= 0 for r in rows.values())
