"""BI connection pools: the catalog's lock-down applied once per DuckDB database, on every pooled connection.

Superset, Metabase and every SQLAlchemy application pool connections. DuckDB shares one database among
the connections a process opens to a file, and the lock-down (the UTC time zone, ``allowed_directories``,
``enable_external_access``, ``lock_configuration``) is a setting of that database, so running the
``.init.sql`` statements on a second connection fails ("the configuration has been locked").
``on_connect`` applies them on the first connection and checks them on the others, which start from the
database's settings (UTC included: it is set GLOBAL).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from proflake.bi.catalog import init_sql_path
from proflake.errors import ProflakeError
from proflake.sql import UTC_STATEMENT

_LOCKDOWN_GUARD = threading.Lock()


def on_connect(catalog: str | os.PathLike) -> Callable[..., None]:
    """A SQLAlchemy ``connect`` listener that locks every pooled connection to a views catalog down:

        sqlalchemy.event.listen(engine, "connect", on_connect("proflake.duckdb"))

    DuckDB shares one database among the connections a process opens to a file, and the lock-down is a
    setting of that database: the first connection applies the ``.init.sql`` statements, later ones find
    the configuration locked, check it is this lock-down, and apply nothing (re-running the statements
    would fail: "the configuration has been locked"). A catalog written by a proflake that did not set
    the time zone is put in UTC all the same."""
    statements = [
        line.rstrip(";") for line in init_sql_path(Path(catalog).expanduser()).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("--")
    ]
    if UTC_STATEMENT not in statements:
        statements.insert(0, UTC_STATEMENT)

    def listener(dbapi_connection, _record=None) -> None:
        lock_down_connection(dbapi_connection, statements)

    return listener


def on_catalog_connect(catalog: str | os.PathLike) -> Callable[..., None]:
    """A ``connect`` listener safe to register on every engine of a process, as Superset's config must
    (``sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", on_catalog_connect(path))``): it locks
    down, as ``on_connect`` does, the DuckDB connections whose database is the ``catalog`` file, and leaves
    every other connection alone (Superset's own SQLite metadata database has no ``current_setting``; another
    DuckDB database is not proflake's to lock). The ``.init.sql`` is read at the catalog's first connection."""
    target = os.path.realpath(Path(catalog).expanduser())
    listeners: list[Callable[..., None]] = []

    def listener(dbapi_connection, record=None) -> None:
        if not type(dbapi_connection).__module__.startswith(("duckdb_engine", "duckdb")):
            return
        if _database_path(dbapi_connection) != target:
            return
        with _LOCKDOWN_GUARD:
            if not listeners:
                listeners.append(on_connect(target))
        listeners[0](dbapi_connection, record)

    return listener


def _database_path(con) -> str | None:
    """The real path of the file a DuckDB connection's default database is (None in memory)."""
    cursor = con.cursor()
    try:
        cursor.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
        row = cursor.fetchone()
    finally:
        cursor.close()
    return os.path.realpath(row[0]) if row and row[0] else None


def lock_down_connection(con, statements: list[str]) -> None:
    """Run the lock-down ``statements`` on a DB-API or DuckDB connection unless its database is locked
    down already; a database locked some other way (external access still on, or a time zone other than
    UTC) is refused."""
    with _LOCKDOWN_GUARD:  # two pooled connections opening at once must not both find it unlocked
        cursor = con.cursor()
        try:
            cursor.execute("SELECT current_setting('lock_configuration'), current_setting('enable_external_access'), "
                           "current_setting('TimeZone')")
            locked, external, zone = cursor.fetchone()
            if _true(locked):
                if _true(external):
                    raise ProflakeError(
                        "the catalog's database was locked without the proflake lock-down (external access is on); "
                        "open it in a fresh process"
                    )
                if zone != "UTC":
                    raise ProflakeError(
                        f"the catalog's database was locked in time zone {zone!r} instead of UTC, so its answers would "
                        "depend on it; open it in a fresh process"
                    )
                return
            for statement in statements:
                cursor.execute(statement)
        finally:
            cursor.close()


def _true(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1")
