"""The BI catalog: a small DuckDB database file that Superset, Metabase, DBeaver and the DuckDB shell open
directly, holding one view per store table and the convenience views of queries/views.sql.

    proflake catalog --out proflake.duckdb               # views only: no data copied (local stores)
    proflake catalog --out proflake.duckdb --materialize # a self-contained copy (required for S3 stores)

A catalog is a snapshot of each Delta table's live file list (Delta's list changes with every commit and
compaction, and vacuum deletes files an old list may still name), so it is rewritten, atomically, by
``refresh_catalogs(store)``: ingest and compaction call it, ``proflake catalog --refresh`` does by hand.
The catalogs to refresh are registered in the store itself (``_proflake/catalogs.json``).

Names and columns of the public views are a contract: ``VIEWS`` below declares them, the README section
between the ``views:start``/``views:end`` markers is generated from it (``python -m etl.catalog --write``),
and tests/test_catalog.py compares both with what DuckDB reports.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from etl import queries
from etl.errors import ProflakeError, UsageError
from etl.s3 import explain_client_error, split_s3_uri
from etl.schema import ALL_TABLES, SQL_TYPES, empty_select
from etl.store import FACT_TABLES, Store, sql_string

REGISTRY = "_proflake/catalogs.json"
# DuckDB's file format of the catalog: the oldest that holds what it needs, so BI tools whose bundled DuckDB
# is older than proflake's (DuckDB 1.x JDBC drivers, the 1.x CLI) open it too.
STORAGE_VERSION = "v1.0.0"
DOC_TYPES = {v: k for k, v in SQL_TYPES.items()}


# -- the public contract ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ViewSpec:
    name: str
    description: str
    columns: tuple[tuple[str, str, str], ...]  # (name, type as in schemas/, meaning)
    catalog_only: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c[0] for c in self.columns]


def _cols(text: str) -> tuple[tuple[str, str, str], ...]:
    """``name type meaning`` lines -> column triples (keeps the declaration below readable)."""
    out = []
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        name, type_name, meaning = line.strip().split(None, 2)
        out.append((name, type_name, meaning))
    return tuple(out)


_CPROFILE_SUMS = """
function string The pstats key, filename:lineno(function_name).
filename string Source file ('~' for built-ins).
lineno int64 Line the function starts on.
function_name string The function's name.
primitive_calls int64 Non-recursive calls, summed (pstats cc).
total_calls int64 All calls, summed (pstats nc).
tottime float64 Seconds in the function itself, summed.
cumtime float64 Seconds in the function and its callees, summed.
intervals int64 Intervals (stats files) the function appears in.
nodes int64 Nodes it appears on.
"""
_PYINSTRUMENT_SUMS = """
function string filename:lineno(function_name).
filename string Source file.
lineno int64 Line of the function.
function_name string The function's name.
class_name string Class of a method, when recorded.
self_time float64 Seconds in the function itself, summed over every frame.
total_time float64 Inclusive seconds summed over the function's outermost frames (recursion counts once).
await_time float64 Seconds awaiting, over the outermost frames.
frames int64 Frames of the function.
intervals int64 Intervals (sessions) the function appears in.
nodes int64 Nodes it appears on.
"""
_JOB = "job_id string The training job.\n"
_PHASE = "job_phase string initialization, training_loop, finalization or whole_job.\n"
_MODES = "start_mode string Mode when profiling started.\nend_mode string Mode when profiling stopped.\n"
_STEP = "mode string The step's mode (train, eval, ...).\nstep int64 The step number.\n"

VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec(
        "manifest",
        "What was ingested from where: one row per live interval (the store's manifest).",
        _cols("""
            source_uri string The stats file read (absolute path or s3:// URI).
            source_size int64 Its size in bytes.
            source_version string Its S3 ETag or local modification time (ns).
            html_uri string pyinstrument: the HTML beside the JSON.
            interval_id string The interval the file produced.
            batch_id string The ingest run that wrote it.
            ingested_at timestamp When that run started.
        """),
    ),
    ViewSpec(
        "batch_runs",
        "Ingest runs, newest first, with their status ([`list_batches.sql`](queries/list_batches.sql), `proflake batches`).",
        _cols("""
            batch_id string The run's id.
            status string committed, running, abandoned or repaired.
            started_at timestamp When the run started.
            finished_at timestamp When it committed, or was marked abandoned/repaired.
            source string What it ingested.
            full_refresh bool It rebuilt the store.
            files_seen int64 Objects listed.
            new_intervals int64 Intervals written.
            replaced_intervals int64 Of those, replacing an older version of a file.
            unchanged int64 Files skipped as already ingested.
            failed int64 Files that could not be ingested.
            rows_written int64 Rows written.
            bytes_read int64 Bytes read.
            seconds float64 Wall time of the run.
        """),
    ),
    ViewSpec(
        "cprofile_by_job_phase",
        "`fetch by-job-phase` for every job: cProfile functions summed per job and job phase, across nodes.",
        _cols(_JOB + _PHASE + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "cprofile_by_training_phase",
        "`fetch by-training-phase` for every job: cProfile functions summed per job and (start_mode, end_mode).",
        _cols(_JOB + _MODES + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "cprofile_by_step",
        "`fetch by-step N --mode M` for every job, mode and step: cProfile functions summed over the intervals "
        "that start and end in that step.",
        _cols(_JOB + _STEP + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_job_phase",
        "`fetch by-job-phase --profiler pyinstrument` for every job.",
        _cols(_JOB + _PHASE + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_training_phase",
        "`fetch by-training-phase --profiler pyinstrument` for every job.",
        _cols(_JOB + _MODES + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_step",
        "`fetch by-step N --mode M --profiler pyinstrument` for every job, mode and step.",
        _cols(_JOB + _STEP + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "step_wall_time",
        "Wall time of each step on each node: from the start of the step's first interval to the end of its "
        "last, over the intervals that start and end in that step (a step profiled in parts counts once).",
        _cols(_JOB + """
            node_id string The node.
            profiler string cprofile or pyinstrument.
        """ + _STEP + """
            start_time timestamp When the step started on the node.
            end_time timestamp When it ended.
            wall_seconds float64 end - start, in seconds.
            profiled_seconds float64 Time the profiler accounted for in the step.
            intervals int64 Intervals the step was profiled in.
        """),
    ),
    ViewSpec(
        "step_node_skew",
        "The same step across nodes (from `step_wall_time`): who was fastest and slowest, and by how much.",
        _cols(_JOB + "profiler string cprofile or pyinstrument.\n" + _STEP + """
            nodes int64 Nodes that profiled the step.
            fastest_seconds float64 Shortest wall time of the step.
            slowest_seconds float64 Longest wall time of the step.
            mean_seconds float64 Mean wall time over the nodes.
            skew_seconds float64 slowest - fastest.
            skew_ratio float64 slowest / fastest (NULL when fastest is 0).
            fastest_node string The fastest node (ties: the first by name).
            slowest_node string The slowest node (ties: the last by name).
            start_spread_seconds float64 Latest start minus earliest start of the step across nodes.
        """),
    ),
    ViewSpec(
        "top_functions",
        "Every function ranked by own time per job, job phase and profiler; filter `rank <= N` for a top N.",
        _cols(_JOB + _PHASE + """
            profiler string cprofile or pyinstrument.
            rank int64 1 = most own time in the job phase (ties by function key).
            function string The function key, filename:lineno(function_name).
            function_name string The function's name.
            filename string Source file.
            lineno int64 Line of the function.
            own_seconds float64 cProfile tottime / pyinstrument self_time, summed.
            total_seconds float64 cProfile cumtime / pyinstrument total_time, summed.
            calls int64 cProfile total calls (NULL for pyinstrument).
            own_share float64 own_seconds / the phase's own seconds of that profiler.
        """),
    ),
    ViewSpec(
        "call_paths",
        "pyinstrument call trees merged per job and job phase: frames on the same call path become one row.",
        _cols(_JOB + _PHASE + """
            path_id int64 Hash of the call path (as pyinstrument_frames.path_id).
            parent_path_id int64 The parent path (NULL for a root).
            depth int64 Distance from the root.
            function string The frame's function key.
            function_name string The frame's function name.
            call_path string The path's function names from the root, joined by ' > '.
            time float64 Inclusive seconds, summed.
            self_time float64 Own seconds, summed.
            await_time float64 Seconds awaiting, summed.
            frames int64 Frames merged into this path.
            intervals int64 Intervals they came from.
            nodes int64 Nodes they came from.
        """),
    ),
    ViewSpec(
        "catalog_info",
        "Catalog files only: what the catalog was made from and when; a dashboard can show it as 'data as of'.",
        _cols("""
            store string The store: its absolute folder or s3:// URI.
            mode string views (reads the store's files) or materialized (holds a copy).
            refreshed_at timestamp When the catalog was written.
            intervals_version int64 Delta version of the intervals table it shows.
            proflake_version string proflake version that wrote it.
        """),
        catalog_only=True,
    ),
)
VIEW_NAMES = tuple(v.name for v in VIEWS)


def view_spec(name: str) -> ViewSpec:
    for v in VIEWS:
        if v.name == name:
            return v
    raise KeyError(name)


def install_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define the convenience views (queries/views.sql and batch_runs) over a connection's store views."""
    con.execute(queries.query_text("views"))
    con.execute("CREATE OR REPLACE VIEW batch_runs AS\n" + queries.query_text("list_batches"))


# -- documentation ---------------------------------------------------------------------------------------
DOCS_START = "<!-- views:start (generated by python -m etl.catalog --write; edit VIEWS in etl/catalog.py) -->"
DOCS_END = "<!-- views:end -->"


def views_markdown() -> str:
    out = [DOCS_START, ""]
    for v in VIEWS:
        out += [f"**`{v.name}`**: {v.description}", ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{n}` | {t} | {m} |" for n, t, m in v.columns]
        out.append("")
    out.append(DOCS_END)
    return "\n".join(out)


def replace_docs(readme: str) -> str:
    head, found, rest = readme.partition(DOCS_START)
    if not found:
        raise ValueError("README.md has no views:start marker")
    _, _, tail = rest.partition(DOCS_END)
    return head + views_markdown() + tail


# -- building a catalog ----------------------------------------------------------------------------------
@dataclass
class CatalogReport:
    path: str
    mode: str
    store: str
    seconds: float = 0.0
    error: str | None = None
    objects: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.error:
            return f"catalog {self.path} not refreshed: {self.error}"
        kind = "views over the store's files" if self.mode == "views" else "a copy of the store's data"
        return f"wrote catalog {self.path} ({kind}; {len(self.objects)} tables and views) in {self.seconds:.2f} s"


def init_sql_path(path: str | os.PathLike) -> Path:
    """The lock-down statements written beside a catalog (``proflake.duckdb`` -> ``proflake.duckdb.init.sql``)."""
    return Path(f"{path}.init.sql")


def allowed_directories(store: Store) -> list[str]:
    """The folders a connection to the store's views must read (and nothing else): one per table."""
    if store.is_remote:
        return []
    return [f"{store.root}/{name}/" for name in ALL_TABLES]


def lockdown_sql(store: Store, materialized: bool) -> str:
    """Statements that make a DuckDB connection to the catalog read-only towards the outside world."""
    dirs = [] if materialized else allowed_directories(store)
    return (
        "-- proflake catalog lock-down: run on each new connection, after opening the catalog read-only.\n"
        "-- Afterwards the connection reads only the store's table folders: no other file, no COPY outside\n"
        "-- them, no ATTACH, no INSTALL/LOAD, and no SET (the configuration is locked).\n"
        f"SET allowed_directories = [{', '.join(sql_string(d) for d in dirs)}];\n"
        "SET enable_external_access = false;\n"
        "SET lock_configuration = true;\n"
    )


def build_catalog(
    store: Store,
    out: str | os.PathLike,
    *,
    materialize: bool = False,
    register: bool = True,
) -> CatalogReport:
    """Write the catalog for ``store`` to ``out`` atomically (a temporary file, then os.replace), and by
    default register it in the store so ``refresh_catalogs`` keeps it current."""
    started = time.perf_counter()
    store.require()
    if store.is_remote and not materialize:
        raise UsageError(
            "a catalog of an S3 store must hold a copy of the data: add --materialize "
            "(views over s3:// would need DuckDB's httpfs extension in every BI tool)"
        )
    target = Path(out).expanduser().absolute()
    if target.suffix.lower() not in (".duckdb", ".db", ".ddb"):
        raise UsageError(f"a catalog file ends in .duckdb (or .db, .ddb); got {str(out)!r}")
    if target.is_dir():
        raise UsageError(f"{str(out)!r} is a folder; name the catalog file, e.g. {str(target / 'proflake.duckdb')!r}")
    if not target.parent.is_dir():
        raise ProflakeError(f"cannot write the catalog {str(out)!r}: folder {str(target.parent)!r} does not exist")
    if target.exists() and not _is_catalog_of(target, store):
        raise UsageError(f"{str(out)!r} exists and is not a proflake catalog of this store; choose another file")

    mode = "materialized" if materialize else "views"
    temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    report = CatalogReport(path=str(target), mode=mode, store=store.location)
    try:
        con = duckdb.connect(str(temp), config={"storage_compatibility_version": STORAGE_VERSION})
        try:
            report.objects = _write_catalog(con, store, materialize)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        _atomic_write(init_sql_path(target), lockdown_sql(store, materialize))
        os.replace(temp, target)
    except OSError as e:
        raise ProflakeError(f"cannot write the catalog {str(out)!r}: {e.strerror or e}") from e
    except duckdb.Error as e:
        raise ProflakeError(f"cannot write the catalog {str(out)!r}: {_first_line(e)}") from e
    finally:
        for leftover in (temp, Path(f"{temp}.wal")):
            leftover.unlink(missing_ok=True)
    if register:
        register_catalog(store, target, materialize)
    report.seconds = time.perf_counter() - started
    return report


def _write_catalog(con: duckdb.DuckDBPyConnection, store: Store, materialize: bool) -> list[str]:
    kind = "TABLE" if materialize else "VIEW"
    objects: list[str] = []
    versions: dict[str, int] = {}
    for name in ALL_TABLES:
        table = store.delta(name)
        versions[name] = table.version()
        source = _source(con, store, name, table, materialize)
        where = " WHERE interval_id IN (SELECT interval_id FROM intervals)" if name in FACT_TABLES else ""
        con.execute(f"CREATE {kind} {name} AS SELECT * FROM {source}{where}")
        objects.append(name)
    con.execute(
        "CREATE VIEW manifest AS SELECT source_uri, source_size, source_version, html_uri, "
        "interval_id, batch_id, ingested_at FROM intervals"
    )
    queries.install_macros(con)
    install_views(con)
    from importlib.metadata import PackageNotFoundError, version

    try:
        proflake_version = version("proflake")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        proflake_version = "unknown"
    now = dt.datetime.now(dt.timezone.utc).isoformat()
    con.execute(
        "CREATE VIEW catalog_info AS SELECT "
        f"{sql_string(store.root)} AS store, {sql_string('materialized' if materialize else 'views')} AS mode, "
        f"CAST({sql_string(now)} AS TIMESTAMP WITH TIME ZONE) AS refreshed_at, "
        f"CAST({versions['intervals']} AS BIGINT) AS intervals_version, {sql_string(proflake_version)} AS proflake_version"
    )
    objects += [v.name for v in VIEWS]
    return objects


def _source(con: duckdb.DuckDBPyConnection, store: Store, name: str, table, materialize: bool) -> str:
    """A FROM item with the table's live rows that the catalog can keep (views) or copy (materialize)."""
    if store.is_remote:
        # Only for a copy: pyarrow reads S3 and DuckDB copies the rows into the catalog file.
        dataset = f"_proflake_source_{name}"
        con.register(dataset, table.to_pyarrow_dataset())
        return dataset
    files = table.file_uris()
    if files:
        return "read_parquet([" + ", ".join(sql_string(f) for f in files) + "])"
    # An empty table has no file to read: a typed, empty SELECT keeps its columns.
    return empty_select(name)


def _is_catalog_of(path: Path, store: Store) -> bool:
    """True when ``path`` is a proflake catalog written for ``store`` (safe to overwrite)."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        if "lock" in str(e).lower():
            raise ProflakeError(
                f"cannot refresh the catalog {str(path)!r}: another process has it open read-write "
                "(BI tools should open it read-only)"
            ) from e
        return False
    try:
        rows = con.execute("SELECT store FROM catalog_info").fetchall()
        return bool(rows) and rows[0][0] == store.root
    except duckdb.Error:
        return False
    finally:
        con.close()


def _atomic_write(path: Path, text: str) -> None:
    temp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


# -- the registry and refresh ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogEntry:
    path: str
    materialize: bool
    host: str

    def to_dict(self) -> dict:
        return {"path": self.path, "materialize": self.materialize, "host": self.host}


def registered_catalogs(store: Store) -> list[CatalogEntry]:
    data = _read_registry(store)
    entries = []
    for item in data.get("catalogs", []) if isinstance(data, dict) else []:
        try:
            entries.append(CatalogEntry(str(item["path"]), bool(item.get("materialize")), str(item.get("host", ""))))
        except (KeyError, TypeError):
            continue
    return entries


def register_catalog(store: Store, path: str | os.PathLike, materialize: bool) -> None:
    path = str(Path(path).absolute())
    entries = [e for e in registered_catalogs(store) if e.path != path]
    entries.append(CatalogEntry(path, materialize, socket.gethostname()))
    _write_registry(store, entries)


def unregister_catalog(store: Store, path: str | os.PathLike) -> bool:
    path = str(Path(path).expanduser().absolute())
    entries = registered_catalogs(store)
    kept = [e for e in entries if e.path != path]
    if len(kept) != len(entries):
        _write_registry(store, kept)
        return True
    return False


def refresh_catalogs(store: Store, log: Callable[[str], None] | None = None) -> list[CatalogReport]:
    """Rewrite every catalog registered in ``store`` that this machine can see, so none names a file that
    compaction replaced. Call after each ingest commit and after compaction's optimize, before its vacuum.

    Never raises for one catalog: a failure is logged and returned (its previous file stays intact, whole).
    A registered catalog whose file was deleted on its own host is unregistered; catalogs of other hosts
    that this one cannot see are left alone (refresh them there with ``proflake catalog --refresh``).
    """
    say = log or (lambda _msg: None)
    reports: list[CatalogReport] = []
    entries = registered_catalogs(store)
    if not entries:
        return reports
    host = socket.gethostname()
    for entry in entries:
        path = Path(entry.path)
        if not path.exists():
            if entry.host == host and path.parent.is_dir():
                unregister_catalog(store, path)
                say(f"catalog {entry.path} no longer exists; unregistered it")
            continue
        try:
            report = build_catalog(store, path, materialize=entry.materialize, register=False)
        except ProflakeError as e:
            report = CatalogReport(path=entry.path, mode="materialized" if entry.materialize else "views",
                                   store=store.location, error=str(e))
        say(report.summary())
        reports.append(report)
    return reports


def _read_registry(store: Store) -> dict:
    if not store.is_remote:
        path = Path(store.root) / REGISTRY
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}
    bucket, key = _registry_key(store)
    client = store.s3.client()
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as e:  # botocore errors; NoSuchKey = nothing registered
        code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404"):
            return {}
        raise explain_client_error(e, f"s3://{bucket}/{key}") from e
    try:
        return json.loads(body)
    except ValueError:
        return {}


def _write_registry(store: Store, entries: list[CatalogEntry]) -> None:
    text = json.dumps({"catalogs": [e.to_dict() for e in entries]}, indent=1) + "\n"
    if not store.is_remote:
        path = Path(store.root) / REGISTRY
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, text)
        return
    bucket, key = _registry_key(store)
    try:
        store.s3.client().put_object(Bucket=bucket, Key=key, Body=text.encode())
    except Exception as e:
        raise explain_client_error(e, f"s3://{bucket}/{key}") from e


def _registry_key(store: Store) -> tuple[str, str]:
    bucket, prefix = split_s3_uri(store.root)
    return bucket, f"{prefix}/{REGISTRY}" if prefix else REGISTRY


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


if __name__ == "__main__":
    readme_path = Path(__file__).resolve().parents[1] / "README.md"
    if "--write" in sys.argv:
        readme_path.write_text(replace_docs(readme_path.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(views_markdown())
