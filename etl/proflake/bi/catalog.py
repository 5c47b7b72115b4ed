"""The BI catalog: a small DuckDB database file that Superset, Metabase, DBeaver and the DuckDB shell open
directly, holding one view per store table and the convenience views of queries/views.sql.

    proflake catalog --out proflake.duckdb               # views only: no data copied (local stores)
    proflake catalog --out proflake.duckdb --views       # views over the store's files (trusted SQL only)

A catalog is a snapshot of each Delta table's live file list (Delta's list changes with every commit and
compaction, and vacuum deletes files an old list may still name), so it is rewritten, atomically, by
``refresh_catalogs(store)``: ingest and compaction call it, ``proflake catalog --refresh`` does by hand.
The catalogs to refresh are registered in the store itself (``_proflake/catalogs.json``).

Names and columns of the public views are a contract declared once in ``proflake.views``; the reference
page docs/reference/views.md is generated from it, and tests/test_catalog.py compares both with what
DuckDB reports.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from proflake import sql as queries
from proflake.errors import ProflakeError, UsageError
from proflake.schema import ALL_TABLES, empty_select
from proflake.sources.settings import client_error_code, explain_client_error, split_s3_uri
from proflake.store.migrations import columns_select, refuse_newer
from proflake.store.store import FACT_TABLES, Store, allowed_directories, sql_string
from proflake.views import VIEWS, install_views

REGISTRY = "_proflake/catalogs.json"
# DuckDB's file format of the catalog: the oldest that holds what it needs, so BI tools whose bundled DuckDB
# is older than proflake's (DuckDB 1.x JDBC drivers, the 1.x CLI) open it too.
STORAGE_VERSION = "v1.0.0"


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


def lockdown_sql(store: Store, materialized: bool) -> str:
    """Statements that put a DuckDB connection to the catalog in UTC and make it read-only towards the
    outside world."""
    dirs = [] if materialized else allowed_directories(store)
    return (
        "-- proflake catalog lock-down: run on each new connection, after opening the catalog read-only.\n"
        "-- Afterwards the connection answers in UTC whatever the client's time zone (day grains, text\n"
        "-- compared with timestamps), reads only the store's table folders: no other file, no COPY outside\n"
        "-- them, no ATTACH, no INSTALL/LOAD, and no SET (the configuration is locked).\n"
        f"{queries.UTC_STATEMENT};\n"
        f"SET allowed_directories = [{', '.join(sql_string(d) for d in dirs)}];\n"
        "SET enable_external_access = false;\n"
        "SET lock_configuration = true;\n"
    )


def build_catalog(
    store: Store,
    out: str | os.PathLike,
    *,
    materialize: bool = True,
    register: bool = True,
) -> CatalogReport:
    """Write the catalog for ``store`` to ``out`` atomically (a temporary file, then os.replace), and by
    default register it in the store so ``refresh_catalogs`` keeps it current.

    ``materialize`` (the default) copies the committed rows into the catalog: a connection locked down by
    its ``.init.sql`` (or its URL options) then reads and writes no file at all, so no BI client can
    change the store. ``materialize=False`` writes views over the store's Parquet files instead, for
    trusted SQL only: DuckDB lets ``COPY ... TO`` write into a folder a connection may read, the store's."""
    started = time.perf_counter()
    store.require()
    refuse_newer(store)
    if store.is_remote and not materialize:
        raise UsageError(
            "a catalog of an S3 store must hold a copy of the data: drop --views "
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
        con = queries.connect(str(temp), config={"storage_compatibility_version": STORAGE_VERSION})
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
        # A store not migrated yet: the columns this release declares read as the store's views read them.
        present = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
        select = columns_select(name, present, source) or f"SELECT * FROM {source}"
        con.execute(f"CREATE {kind} {name} AS {select}{where}")
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
        con = queries.connect(str(path), read_only=True)
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
    assert store.s3 is not None  # a store on S3 has its S3 settings
    client = store.s3.client()
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as e:  # botocore errors; NoSuchKey = nothing registered
        if client_error_code(e) in ("NoSuchKey", "404"):  # (a connection error has no response at all)
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
    assert store.s3 is not None  # a store on S3 has its S3 settings
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
