"""Load queries/<name>.sql by name and run them with bound named parameters.

SQL text only ever comes from the files in queries/; values always travel as DuckDB parameters.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from etl.errors import QueryError
from etl.resources import resource_dir
from etl.store import FileSpans

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


def parameters_of(sql: str) -> list[str]:
    """The $names a statement uses, comments ignored, in order of first use."""
    seen: dict[str, None] = {}
    for name in _PARAM.findall(_COMMENT.sub("", sql)):
        seen.setdefault(name, None)
    return list(seen)


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


def rollup_parameters(selection: pa.Table, params: dict[str, Any], files: Mapping[str, FileSpans]) -> dict[str, Any]:
    """The parameters of a roll-up over a fetch's selected intervals: ``params`` plus their ids (the list
    parameter ``$interval_ids``), their time span, and each fact table's files that can hold them.

    The fetch query ran once already to produce the intervals; passing their ids spares running it again
    inside the roll-up. (A list parameter costs less than registering the Arrow table as a view for the
    few intervals most fetches select: registering and unregistering took ~1 ms, on DuckDB 2.0.1's Python
    layer; 10k ids take ~6 ms to convert, small beside the scan of 10k intervals' rows.) ``files`` (from
    ``Store.connect_with_files``) narrows each fact table to the files whose rows can start inside the
    selection's time span and belong to one of its nodes.
    """
    starts = selection["start_time_us"]
    low = pc.min(starts).as_py() if len(starts) else 0.0
    high = pc.max(starts).as_py() if len(starts) else -1.0
    nodes = pc.unique(selection["node_id"]).to_pylist()
    span: dict[str, Any] = {
        "interval_ids": selection["interval_id"].to_pylist(),
        "min_start_time_us": low,
        "max_start_time_us": high,
    }
    for table, spans in files.items():
        # read_parquet needs at least one file; with none overlapping, any one answers nothing.
        span[f"{table}_files"] = spans.overlapping(low, high, nodes) or spans.uris[:1]
    return {**params, **span}
