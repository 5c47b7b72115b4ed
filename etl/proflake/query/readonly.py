"""Read-only SQL over a store: the connection behind ``proflake sql`` and ``Profiles.sql``.

Two locks, because neither is enough alone:

1. DuckDB's own: after the views and macros are defined, the connection may read only the store's table
   folders (``allowed_directories``), nothing else on disk or on the network (``enable_external_access =
   false``: no other file, no ATTACH, no INSTALL/LOAD, no httpfs), and its configuration is locked
   (``lock_configuration``). DuckDB still lets ``COPY ... TO`` write *inside* an allowed folder — into the
   store itself — so:
2. proflake's: every statement is parsed by DuckDB's own parser first and only queries run (SELECT, WITH,
   FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT ... IN (...), EXPLAIN of those). Anything else — COPY,
   EXPORT, ATTACH, DETACH, INSTALL, LOAD, SET, RESET, USE, PRAGMA (bar a few read-only ones), CREATE,
   INSERT, UPDATE, DELETE, DROP, ALTER, CALL, CHECKPOINT, transactions — is refused with one line naming it,
   before anything executes; so are the few table functions that change state even inside a SELECT.

Parameters are always bound by DuckDB (``$name``), never formatted into the SQL.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import duckdb
import pyarrow as pa

from proflake import sql as queries
from proflake.errors import QueryError, ReadOnlyError
from proflake.query.bounded import Bounds
from proflake.store.store import Store, allowed_directories, sql_string
from proflake.views import install_views

_QUERY_TYPES = {duckdb.StatementType.SELECT}
_READ_ONLY_PRAGMAS = {
    "show_tables", "show_tables_expanded", "table_info", "show", "version", "platform", "database_size",
    "functions", "collations", "user_agent", "storage_info", "metadata_info",
}
# Functions that change state even when called from a SELECT (or run SQL hidden in a string).
_STATEFUL_FUNCTIONS = {
    "checkpoint", "force_checkpoint", "enable_logging", "disable_logging", "truncate_duckdb_logs",
    "enable_profiling", "disable_profiling", "create_external_resource", "register_external_resource",
    "register_external_resource_type", "deregister_external_resource", "destroy_external_resource",
    "add_grammar_extension", "remove_grammar_extension", "json_execute_serialized_sql", "query", "query_table",
}
ALLOWED_TEXT = "only queries run: SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT ... IN (...), EXPLAIN"


def refused(what: str) -> ReadOnlyError:
    return ReadOnlyError(f"proflake sql runs read-only: {what} is not allowed ({ALLOWED_TEXT})")


# -- the connection ------------------------------------------------------------------------------------
def connect(store: Store, bounds: Bounds | None = None) -> duckdb.DuckDBPyConnection:
    """The store's tables, manifest, convenience views and macros on a connection locked as described above
    (with ``bounds``' memory limit set first: a locked connection cannot change it)."""
    con = store.connect()
    try:
        queries.install_macros(con)
        install_views(con)
        if bounds is not None:
            bounds.configure(con)
        lock_down(con, allowed_directories(store))
    except BaseException:
        con.close()
        raise
    return con


def lock_down(con: duckdb.DuckDBPyConnection, directories: list[str]) -> None:
    """Allow reading only ``directories``; no other file, network, extension or setting, from now on."""
    con.execute("SET allowed_directories = [" + ", ".join(sql_string(d) for d in directories) + "]")
    con.execute("SET python_enable_replacements = false")  # no reading the caller's Python variables
    con.execute("SET errors_as_json = true")  # errors carry the position of the offending text
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


# -- checking statements -------------------------------------------------------------------------------
def check(con: duckdb.DuckDBPyConnection, text: str) -> list[duckdb.Statement]:
    """The statements of ``text``, parsed by DuckDB; raises ReadOnlyError for anything but a query."""
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as e:
        raise QueryError(explain(e, text)) from e
    if not statements:
        raise QueryError("the query is empty")
    for statement in statements:
        _check_statement(con, statement.query, statement.type)
    return statements


def _check_statement(con: duckdb.DuckDBPyConnection, text: str, kind: duckdb.StatementType) -> None:
    words = _leading_keywords(text)
    if kind == duckdb.StatementType.EXPLAIN:
        inner, label = _explained(text)
        if inner is None:
            raise refused(label)
        inner_statements = con.extract_statements(inner)
        for s in inner_statements:
            try:
                _check_statement(con, s.query, s.type)
            except ReadOnlyError:
                raise refused(f"{label} of {' '.join(_leading_keywords(s.query)[:2]) or s.type.name}") from None
        return
    if kind == duckdb.StatementType.PRAGMA:
        name = _pragma_name(text)
        if name in _READ_ONLY_PRAGMAS and "=" not in text:
            _check_functions(text)
            return
        raise refused(f"PRAGMA {name}" if name else "PRAGMA")
    if kind == duckdb.StatementType.MULTI:
        raise refused("PIVOT without an IN (...) list")
    if kind not in _QUERY_TYPES:
        raise refused(_statement_label(words, kind, text))
    _check_functions(text)


def _check_functions(text: str) -> None:
    tokens = _tokens(text)
    for (word, _), (after, _) in itertools.pairwise(tokens):
        name = word.strip('"').lower()
        if after.startswith("(") and name in _STATEFUL_FUNCTIONS:
            raise refused(f"{name}()")


def _tokens(text: str) -> list[tuple[str, Any]]:
    """(text, type) of each token, comments dropped."""
    raw = duckdb.tokenize(text)
    out = []
    for i, (start, kind) in enumerate(raw):
        end = raw[i + 1][0] if i + 1 < len(raw) else len(text)
        if kind == duckdb.token_type.comment:
            continue
        piece = text[start:end].strip()
        # An operator token may run into the next one (e.g. ")," ); keep its first character for "(" checks.
        out.append((piece, kind))
    return out


def _leading_keywords(text: str) -> list[str]:
    words = []
    for piece, kind in _tokens(text):
        if kind != duckdb.token_type.keyword:
            break
        words.append(piece.upper())
    return words


def _statement_label(words: list[str], kind: duckdb.StatementType, text: str) -> str:
    if not words:
        return kind.name
    first = words[0]
    if first in ("CREATE", "DROP", "ALTER", "FORCE"):
        noise = {"OR", "REPLACE", "IF", "NOT", "EXISTS"}
        return " ".join([first] + [w for w in words[1:] if w not in noise][:2])
    if first == "EXPORT":
        return "EXPORT DATABASE"
    if first == "PRAGMA":
        return f"PRAGMA {_pragma_name(text)}".strip()
    return first


def _pragma_name(text: str) -> str:
    tokens = [t for t, _ in _tokens(text)]
    return tokens[1].lower() if len(tokens) > 1 else ""


def _explained(text: str) -> tuple[str | None, str]:
    """The statement inside ``EXPLAIN [ANALYZE] [(options)] statement``, and a label for messages."""
    raw = [(s, k) for s, k in duckdb.tokenize(text) if k != duckdb.token_type.comment]
    label = "EXPLAIN"
    i = 0
    if i < len(raw) and text[raw[i][0]:].upper().startswith("EXPLAIN"):
        i += 1
    if i < len(raw) and re.match(r"ANALY[SZ]E\b", text[raw[i][0]:], flags=re.IGNORECASE):
        label = "EXPLAIN ANALYZE"
        i += 1
    if i < len(raw) and text[raw[i][0]:].startswith("("):
        depth = 0
        while i < len(raw):
            piece = text[raw[i][0] : raw[i + 1][0] if i + 1 < len(raw) else len(text)].strip()
            depth += piece.count("(") - piece.count(")")
            i += 1
            if depth <= 0:
                break
    if i >= len(raw):
        return None, label
    return text[raw[i][0]:], label


# -- running -------------------------------------------------------------------------------------------
def run(con: duckdb.DuckDBPyConnection, text: str, params: dict[str, Any] | None = None) -> pa.Table:
    """Run one read-only query with named parameters bound by DuckDB; errors become one clear line."""
    params = dict(params or {})
    statements = check(con, text)
    if len(statements) > 1:
        raise QueryError(f"proflake sql runs one query at a time; this text holds {len(statements)} statements")
    statement = statements[0]
    wanted = set(statement.named_parameters)
    if any(name.isdigit() for name in wanted):
        raise QueryError("use named parameters ($name, bound with --param name=value), not ? or $1")
    missing = sorted(wanted - set(params))
    if missing:
        raise QueryError(
            "the query needs a value for " + ", ".join(f"${n}" for n in missing)
            + " (" + ", ".join(f"--param {n}=VALUE" for n in missing) + ")"
        )
    unused = sorted(set(params) - wanted)
    if unused:
        raise QueryError("parameter(s) " + ", ".join(f"${n}" for n in unused) + " not used by the query")
    bound = {name: params[name] for name in wanted}
    try:
        return con.sql(statement.query, params=bound or None).to_arrow_table()
    except duckdb.Error as e:
        error: duckdb.Error = e
        if "position" not in str(e) and isinstance(e, (duckdb.BinderException, duckdb.CatalogException)):
            # The relation API drops the error position; the statement fails the same way (before running)
            # through execute(), which keeps it.
            try:
                con.execute(statement.query, bound or None)
            except duckdb.Error as positioned:
                error = positioned
        raise QueryError(explain(error, text, offset=_offset(text, statement.query))) from e


def _offset(text: str, piece: str) -> int:
    found = text.find(piece)
    return max(found, 0)


def explain(error: BaseException, text: str, offset: int = 0) -> str:
    """One line: DuckDB's error type and message, and where in ``text`` it points (line, column, excerpt)."""
    message = str(error).strip()
    prefix, sep, body = message.partition(": ")
    position = None
    if sep and body.startswith("{"):
        try:
            detail = json.loads(body)
        except ValueError:
            detail = None
        if isinstance(detail, dict):
            body = str(detail.get("exception_message", body))
            if "position" in detail:
                try:
                    position = int(detail["position"])
                except (TypeError, ValueError):
                    position = None
    else:
        # Plain text: DuckDB's "LINE n: ..." caret block is dropped here (it spans lines).
        body = re.split(r"\n\s*\nLINE \d+:", body, maxsplit=1)[0]
    line = " ".join(part.strip() for part in (prefix + sep + body).splitlines() if part.strip())
    if position is not None:
        absolute = offset + position
        before = text[:absolute]
        line_no = before.count("\n") + 1
        column = absolute - (before.rfind("\n") + 1) + 1
        near = text[absolute:].split("\n", 1)[0].strip()
        if len(near) > 40:
            near = near[:37] + "..."
        line += f" (at line {line_no}, column {column}" + (f', near "{near}")' if near else ")")
    return line


# -- describing ----------------------------------------------------------------------------------------
SCHEMA_SQL = """
SELECT c.table_name AS name,
       -- the store's tables are views over their files, or (intervals) an in-memory copy of them
       CASE WHEN t.table_type = 'LOCAL TEMPORARY' THEN 'table' ELSE lower(t.table_type) END AS kind,
       c.ordinal_position AS position,
       c.column_name AS column_name,
       c.data_type AS data_type
FROM information_schema.columns AS c
JOIN information_schema.tables AS t USING (table_catalog, table_schema, table_name)
WHERE c.table_schema = 'main' AND NOT starts_with(c.table_name, '_')
ORDER BY c.table_name, c.ordinal_position
"""


def schema(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """Every public table and view with its columns and DuckDB types."""
    return con.sql(SCHEMA_SQL).to_arrow_table()
