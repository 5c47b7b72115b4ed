"""The store's schema version and the migrations that bring an older store to this release's.

schemas/*.json declare every table's columns as this release writes them; ``MIGRATIONS`` says, in
order, from which store schema version each added column exists, and how rows written before it read.
A store records its version and the migrations applied to it in ``_proflake/schema.json``; a store
without that file was written before versions existed: version 1.

A migration adds its columns to one table and back-fills them, in ONE Delta commit that rewrites the
table with the declared schema (every row kept, each old row given its ``read_as`` value), so every
Delta reader (Spark, Athena, DuckDB) sees the same values and every file of the table has the same
columns. The store's record is written after that commit, atomically (a rename; one PUT on S3). A run
killed before the commit leaves the store as it was (the files it wrote are unreferenced: vacuum
removes them); killed between the commit and the record, the next writer finds the columns there,
records the migration as found applied, and rewrites nothing. Either way no row is lost or doubled.

Readers of a store not migrated yet read a missing column as its ``read_as`` value (the views,
etl/proflake/store/snapshot.py). A store whose version is newer than ``CURRENT_VERSION`` was written by
a later release and is refused by every command (``NewerStoreError``), never misread.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake.errors import NewerStoreError, StoreError
from proflake.schema import SQL_TYPES, table_spec

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from proflake.store.store import Store

RECORD = "_proflake/schema.json"


@dataclass(frozen=True)
class Migration:
    """Store schema ``version``: ``columns`` (declared in schemas/<table>.json) added to ``table``.
    ``read_as``: column -> the SQL value (over the row's other columns) a row written before it holds;
    a column not named reads as NULL."""

    version: int
    table: str
    columns: tuple[str, ...]
    change: str
    read_as: dict[str, str] = field(default_factory=dict)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2, "intervals", ("source_format", "time_unit", "sample_rate_hz"),
        "intervals gains source_format, time_unit and sample_rate_hz (sampled input formats)",
        read_as={"source_format": "profiler", "time_unit": "'seconds'"},
    ),
)
CURRENT_VERSION = MIGRATIONS[-1].version if MIGRATIONS else 1
_MIGRATED_TABLES = frozenset(m.table for m in MIGRATIONS)


@dataclass(frozen=True)
class SchemaState:
    """What a store records: its version and the history of how it got there (oldest first)."""

    version: int
    history: tuple[dict, ...] = ()

    @property
    def pending(self) -> list[Migration]:
        return [m for m in MIGRATIONS if m.version > self.version]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": self.version, "current_version": CURRENT_VERSION,
                "pending": [m.version for m in self.pending], "history": list(self.history)}


def added_columns(table: str) -> dict[str, Migration]:
    """Column -> the migration that added it, for ``table``."""
    return {c: m for m in MIGRATIONS if m.table == table for c in m.columns}


def columns_select(table: str, present: Sequence[str], source: str) -> str | None:
    """A SELECT of ``table``'s declared columns from ``source``, whose columns are ``present``: a declared
    column it lacks (a store not migrated yet, a bookkeeping table written before the column) reads as
    its migration's ``read_as`` value, else NULL. None when nothing is missing."""
    have = set(present)
    missing = [c for c in table_spec(table).columns if c.name not in have]
    if not missing:
        return None
    added = added_columns(table)
    values = []
    for c in missing:
        migration = added.get(c.name)
        value = migration.read_as.get(c.name, "NULL") if migration is not None else "NULL"
        values.append(f'CAST({value} AS {SQL_TYPES[c.type_name]}) AS "{c.name}"')
    return f"SELECT *, {', '.join(values)} FROM {source}"


def is_migrated_table(table: str) -> bool:
    return table in _MIGRATED_TABLES


# -- the record -------------------------------------------------------------------------------------
def _read_record(store: Store) -> bytes | None:
    if not store.is_remote:
        try:
            with open(os.path.join(store.root, RECORD), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"cannot read {RECORD} of the store at {store.location!r}: {e.strerror}") from e
    import botocore.exceptions

    from proflake.sources.settings import explain_client_error, split_s3_uri

    bucket, key = split_s3_uri(f"{store.root}/{RECORD}")
    assert store.s3 is not None
    try:
        return bytes(store.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    except botocore.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise explain_client_error(e, f"s3://{bucket}/{key}") from e


def _write_record(store: Store, state: SchemaState) -> None:
    """Replace the record atomically: a rename on disk (after fsync), one PUT on S3."""
    body = (json.dumps({"schema_version": state.version, "history": list(state.history)}, indent=1) + "\n").encode()
    if store.is_remote:
        from proflake.sources.settings import explain_client_error, split_s3_uri

        bucket, key = split_s3_uri(f"{store.root}/{RECORD}")
        assert store.s3 is not None
        try:
            store.s3.client().put_object(Bucket=bucket, Key=key, Body=body)
        except Exception as e:  # botocore's errors, named by explain_client_error
            raise explain_client_error(e, f"s3://{bucket}/{key}") from e
        return
    target = os.path.join(store.root, RECORD)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + ".tmp", "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(target + ".tmp", target)


def schema_state(store: Store) -> SchemaState:
    """The store's recorded version and history (version 1, no history, when it records none)."""
    data = _read_record(store)
    if data is None:
        return SchemaState(1)
    try:
        doc = json.loads(data)
        version = doc["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(version)
        return SchemaState(version, tuple(doc.get("history") or ()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreError(
            f"{RECORD} of the store at {store.location!r} is not a schema record proflake wrote; run 'proflake "
            f"check --store {store.location}' (--repair rewrites it from the tables' columns)"
        ) from e


def refuse_newer(store: Store, state: SchemaState | None = None) -> SchemaState:
    """The store's schema state; NewerStoreError when a later release wrote it."""
    state = state or schema_state(store)
    if state.version > CURRENT_VERSION:
        raise NewerStoreError(
            f"the store at {store.location!r} has schema version {state.version}, written by a later proflake; "
            f"this release reads and writes up to version {CURRENT_VERSION}: upgrade proflake to use it"
        )
    return state


# -- migrating --------------------------------------------------------------------------------------
def _proflake_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("proflake")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def _entry(migration: Migration, step: str, rows: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "version": migration.version, "change": migration.change, "step": step,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "by": f"proflake {_proflake_version()}",
    }
    if rows is not None:
        entry["rows"] = rows
    return entry


def migrate(store: Store, log: Callable[[str], None] | None = None) -> list[dict]:
    """Apply every pending migration, in order; the history entries added ([]: none pending). Call with
    the writer lock held. Each migration is one Delta commit (skipped when its columns are there
    already: created by this release, or a killed run's commit), then the record."""
    say = log or (lambda message: None)
    state = refuse_newer(store)
    added: list[dict] = []
    history = list(state.history)
    for migration in state.pending:
        table = store.delta(migration.table)
        have = {f.name for f in table.schema().fields}
        if all(c in have for c in migration.columns):
            # Its columns exist: a table this release created, or a killed run committed the rewrite.
            entry = _entry(migration, "created" if table.version() == 0 else "found applied", None)
        else:
            rows = _rewrite(store, migration, table)
            entry = _entry(migration, "migrated", rows)
            say(f"migrated the store to schema version {migration.version}: {migration.change} ({rows:,} rows rewritten)")
        history.append(entry)
        added.append(entry)
        _write_record(store, SchemaState(migration.version, tuple(history)))
    return added


def recover_record(store: Store) -> SchemaState:
    """Rewrite an unreadable record from the tables' columns: the store is at the last version whose
    migrations' columns are all there (its earlier history is lost, and said so)."""
    version = 1
    for migration in MIGRATIONS:
        try:
            have = {f.name for f in store.delta(migration.table).schema().fields}
        except StoreError:  # a lost or damaged table, restored by --repair as this release declares it
            have = set()
        if not all(c in have for c in migration.columns):
            break
        version = migration.version
    entry = {"version": version, "change": f"{RECORD} rewritten from the tables' columns (its history was unreadable)",
             "step": "recovered", "at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "by": f"proflake {_proflake_version()}"}
    state = SchemaState(version, (entry,))
    _write_record(store, state)
    return state


def _rewrite(store: Store, migration: Migration, table: Any) -> int:
    """Rewrite ``migration.table`` with its declared columns in one commit, back-filling the new ones."""
    return _rewrite_table(store, migration.table, table, f"migration-{migration.version}")


def _rewrite_table(store: Store, name: str, table: Any, label: str) -> int:
    """Rewrite table ``name`` with its declared columns in one commit (fenced), each column a migration
    added back-filled where a row lacks it; the rows rewritten."""
    spec = table_spec(name)
    read_as = {c: m.read_as[c] for c, m in added_columns(name).items() if c in m.read_as}
    dataset = table.to_pyarrow_dataset()
    rows = [0]

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in dataset.to_batches():
            if rows[0]:
                _kill_point("migration-rewrite")
            rows[0] += batch.num_rows
            yield _back_filled(batch, read_as, spec.arrow_schema)

    reader = pa.RecordBatchReader.from_batches(spec.arrow_schema, batches())
    store._overwrite(name, reader, None, label)  # one commit, fenced
    return rows[0]


def files_lacking_columns(store: Store, version: int, open_table: Callable[[str], DeltaTable] | None = None,
                          ) -> dict[str, tuple[list[str], list[str]]]:
    """Table -> (its data files, columns) for the files of a local store that lack a column the
    migrations up to ``version`` added: written into the migrated store by an older release.
    ``open_table(name)``: the table as the caller has it open (default ``store.delta``)."""
    import pyarrow.parquet as pq

    out = {}
    for name in sorted({m.table for m in MIGRATIONS if m.version <= version}):
        columns = [c for m in MIGRATIONS if m.table == name and m.version <= version for c in m.columns]
        try:
            uris = (open_table or store.delta)(name).file_uris()
        except StoreError:  # a lost table or a damaged log: check's own findings
            continue
        lacking = []
        for uri in uris:
            try:
                names = set(pq.read_schema(uri).names)
            except Exception:  # noqa: BLE001 (an unreadable file is check's bad_file finding)
                continue
            if not set(columns) <= names:
                lacking.append(uri)
        if lacking:
            out[name] = (lacking, columns)
    return out


def back_fill(store: Store, name: str) -> int:
    """Rewrite table ``name`` so every file has this release's columns (``check --repair``, for files an
    older release wrote into a migrated store); the rows rewritten. Call with the writer lock held."""
    return _rewrite_table(store, name, store.delta(name), "back-fill")


def _kill_point(point: str) -> None:
    """Crash testing: PROFLAKE_KILL_AT=migration-rewrite SIGKILLs the process half-way through a
    migration's rewrite (its first rows handed to the writer, nothing committed); the commit points
    themselves are PROFLAKE_KILL_AFTER_COMMITS's (etl/proflake/store/store.py)."""
    if os.environ.get("PROFLAKE_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _back_filled(batch: pa.RecordBatch, read_as: dict[str, str], schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in ``schema``: a column it lacks, or the NULLs of one it holds, take the column's
    ``read_as`` value (another column, or a string constant); a column it lacks with none is NULL."""
    import pyarrow.compute as pc

    arrays = []
    for f in schema:
        value = read_as.get(f.name)
        held = batch.column(f.name).cast(f.type) if f.name in batch.schema.names else None
        if value is None:
            arrays.append(held if held is not None else pa.nulls(batch.num_rows, f.type))
            continue
        fill = pa.scalar(value.strip("'"), f.type) if value.startswith("'") else batch.column(value).cast(f.type)
        if held is None:
            arrays.append(pa.array([fill.as_py()] * batch.num_rows, f.type) if isinstance(fill, pa.Scalar) else fill)
        else:
            arrays.append(pc.coalesce(held, fill))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
