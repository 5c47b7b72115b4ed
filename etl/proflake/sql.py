"""Load queries/<name>.sql by name and run them with bound named parameters; open DuckDB connections.

SQL text only ever comes from the files in queries/; values always travel as DuckDB parameters. Every
DuckDB connection proflake opens or hands out comes from ``connect`` (or went through ``in_utc``), so its
answers do not depend on the time zone of the process that asks (docs/sql-and-bi.md#time-zones).
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from typing import Any

import duckdb
import pyarrow as pa

from proflake.errors import QueryError
from proflake.resources import resource_dir

# DuckDB takes a connection's time zone from the process's (TZ): date_trunc and the other calendar functions
# on TIMESTAMPTZ, text compared with or cast to TIMESTAMPTZ, and TIMESTAMPTZ handed to Arrow and Python all
# follow it. GLOBAL: cursors and later connections to the same database (a BI pool's) start from it too.
UTC_STATEMENT = "SET GLOBAL TimeZone = 'UTC'"
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_COMMENT = re.compile(r"--[^\n]*")


@cache
def query_text(name: str) -> str:
    path = resource_dir("queries") / f"{name}.sql"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QueryError(f"proflake has no query named {name!r}") from None


def query_names() -> list[str]:
    return sorted(p.stem for p in resource_dir("queries").glob("*.sql"))


def without_comments(sql: str) -> str:
    """The statement with its ``--`` comments removed."""
    return _COMMENT.sub("", sql)


def parameters_of(sql: str) -> list[str]:
    """The $names a statement uses, comments ignored, in order of first use."""
    seen: dict[str, None] = {}
    for name in _PARAM.findall(without_comments(sql)):
        seen.setdefault(name, None)
    return list(seen)


def connect(database: str = ":memory:", *, read_only: bool = False, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, answering in UTC (``in_utc``)."""
    return in_utc(duckdb.connect(database, read_only=read_only, config=config or {}))


def in_utc(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` with its session time zone UTC, and the default of every cursor or connection opened on its
    database afterwards; a connection handed in with a zone of its own set is switched too. Returns ``con``."""
    con.execute(UTC_STATEMENT)
    con.execute("SET SESSION TimeZone = 'UTC'")
    return con


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(query_text("macros"))


def bind(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """Exactly the parameters the statement uses; a missing one is a programming error, said plainly."""
    names = parameters_of(sql)
    missing = [n for n in names if n not in params]
    if missing:
        raise QueryError(f"query needs parameter(s) {', '.join('$' + n for n in missing)}")
    return {n: params[n] for n in names}


def run(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> pa.Table:
    try:
        # con.sql() parses and binds a statement to describe its relation, then parses, binds and plans it
        # again to run it; execute() does that once. Its Arrow result is copied out of the finished result,
        # which DuckDB warns about: for a fetch's few hundred rows the copy costs far less than the
        # second planning (1.2 ms of a 3 ms selection, measured on DuckDB 2.0.1).
        result = con.execute(sql, bind(sql, params))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Arrow output on a DB-API result", UserWarning)
            return result.to_arrow_table()
    except duckdb.Error as e:
        raise QueryError(str(e).strip().splitlines()[0]) from e


def run_named(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> pa.Table:
    return run(con, query_text(name), params)
