"""The fast paths of the cProfile reader: Python for the common shape, and the compiled decoder.

Both may decline a dump (``Unusual``), which the careful path in cprofile.py then reads; neither may
accept what the careful path rejects, nor produce other columns (tests/test_readers.py compares them).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from types import ModuleType

import numpy as np
import pyarrow as pa

from proflake.readers import marshal_guard
from proflake.readers.cprofile_data import _INT64_MAX, CProfileData, std_name

_compiled: ModuleType | None
try:  # built from _pstats_columns.c at install; without a C compiler, the Python paths do its work
    from proflake.readers import _pstats_columns as _compiled
except ImportError:
    _compiled = None



# True in a parse worker, whose crash costs only the file it parses (the pool quarantines it).
CRASH_CONTAINED = False


def refuse_unsafe(data: bytes) -> None:
    """Raise ``Refused`` when ``marshal.loads(data)`` could crash the process (a tuple that refers to
    itself, a code object: see marshal_guard.py); the compiled walk where it was built, else Python's
    (60 ms for a 420 KB dump, 10x marshal.loads: skipped in a parse worker, CRASH_CONTAINED)."""
    try:
        if _compiled is not None:
            _compiled.check(data)
        elif not CRASH_CONTAINED:
            marshal_guard.check(data)
    except ValueError as e:
        raise Refused(str(e)) from None


# -- the fast path ----------------------------------------------------------------------------------
# Parse workers read thousands of dumps of one job, nearly all well formed. The fast path checks a
# dump with as few passes over its objects as Python allows and hands anything unusual to the careful
# path above, which accepts and rejects exactly what it always did and names the bad value. So the fast
# path may decline valid input (that only costs time) but must never accept what the careful path
# rejects, nor produce other columns: tests/test_readers.py compares the two.
_KEY_FIELDS = [
    ("function", pa.string()),
    ("filename", pa.string()),
    ("lineno", pa.int64()),
    ("function_name", pa.string()),
]
_KEY_SCHEMA = pa.schema(_KEY_FIELDS)
_NUMBER_FIELDS = [("tottime", pa.float64()), ("cumtime", pa.float64())]
_FUNCTIONS_SCHEMA = pa.schema(
    [*_KEY_FIELDS, ("primitive_calls", pa.int64()), ("total_calls", pa.int64()), *_NUMBER_FIELDS]
)
_CALLERS_SCHEMA = pa.schema(
    [*_KEY_FIELDS, *[("caller_" + name, kind) for name, kind in _KEY_FIELDS],
     ("total_calls", pa.int64()), ("primitive_calls", pa.int64()), *_NUMBER_FIELDS]
)
_TIME_LIMIT = 2.0**63  # a float below it is <= 2**63-1, the careful path's bound
_KNOWN_KEYS_LIMIT = 50_000  # adding keys copies the known ones, so keep that copy cheap
# What the checks and conversions below raise on odd input: "not the common shape", nothing more.
_DECLINE = (TypeError, ValueError, OverflowError, LookupError, struct.error, pa.ArrowException)


class Unusual(Exception):
    """The fast path declines this dump; the careful path decides."""


class Refused(Exception):
    """The compiled decoder refuses this dump outright: no pstats dump is so, and marshal.loads could
    crash the process on it."""


@dataclass(frozen=True)
class _KnownKeys:
    """Function keys already checked in this process, each with its row of key columns.

    Dumps of one job repeat the same few thousand functions, so a key is checked, named
    (pstats.func_std_string) and encoded once; a dump's key columns are then one ``take`` of rows.
    Never changed, only replaced, so a reader always sees rows and columns that belong together.
    A key's id is ``first_id`` + its row; starting over continues the numbering, so no id is ever
    given to two keys.
    """

    row: dict  # FunctionKey -> row in columns
    columns: pa.RecordBatch | None  # _KEY_SCHEMA; None before the first key: pa.array imports pandas
    first_id: int = 0


_NO_KEYS = _KnownKeys({}, None)
_known = _NO_KEYS


def _key_rows(keys: list) -> tuple[np.ndarray, _KnownKeys]:
    """Rows of ``keys`` (one or more) in the known key columns, adding new keys; Unusual if a key is bad."""
    global _known
    # Lookups match by equality, and 1.0, True and 1+0j all equal 1: a known key proves the strings
    # (only a str equals a str) but not the line number's type.
    if not _all_of_type(map(itemgetter(1), keys), int, len(keys)):
        raise Unusual
    lookup = itemgetter(*keys, keys[0])  # at least two items, so it returns a tuple
    known = _known
    try:
        rows = lookup(known.row)
    except KeyError:
        known = _known = _with_keys(known, keys)
        rows = lookup(known.row)
    return np.frombuffer(struct.pack(f"{len(rows)}q", *rows), np.int64)[:-1], known


def _with_keys(known: _KnownKeys, keys: list) -> _KnownKeys:
    new = list(dict.fromkeys(k for k in keys if k not in known.row))
    if len(known.row) + len(new) > _KNOWN_KEYS_LIMIT:
        known = _KnownKeys({}, None, known.first_id + len(known.row))
        new = list(dict.fromkeys(keys))
    if not _all_of_type(new, tuple, len(new)) or set(map(len, new)) != {3}:
        raise Unusual
    filenames, linenos, function_names = zip(*new)
    if not (_all_of_type(filenames, str, len(new)) and _all_of_type(function_names, str, len(new))):
        raise Unusual
    if min(linenos) < 0 or max(linenos) > _INT64_MAX:
        raise Unusual
    added = pa.RecordBatch.from_arrays(  # encoding raises on lone surrogates
        [pa.array(list(map(std_name, new)), pa.string()), pa.array(filenames, pa.string()),
         pa.array(linenos, pa.int64()), pa.array(function_names, pa.string())],
        schema=_KEY_SCHEMA,
    )
    columns = added
    if known.columns is not None:
        columns = pa.Table.from_batches([known.columns, added]).combine_chunks().to_batches()[0]
    return _KnownKeys({**known.row, **dict(zip(new, range(len(known.row), columns.num_rows)))}, columns,
                      known.first_id)


def _all_of_type(values: Iterable, kind: type, count: int) -> bool:
    # Exact types, as the careful path checks them (a bool is an int subclass); cheaper than a set.
    return list(map(type, values)).count(kind) == count


def fast_tables(stats: dict) -> CProfileData:
    try:
        return _fast_tables_or_raise(stats)
    except _DECLINE as e:
        raise Unusual from e


def _fast_tables_or_raise(stats: dict) -> CProfileData:
    n = len(stats)
    if not n:
        raise Unusual
    keys = list(stats)
    values = list(stats.values())
    if not _all_of_type(values, tuple, n):
        raise Unusual
    cc, nc, tt, ct, callers = zip(*values, strict=True)  # ValueError unless all have 5 fields
    edges = list(chain.from_iterable(map(dict.values, callers)))  # TypeError unless all are dicts
    caller_keys = list(chain.from_iterable(callers))
    m = len(edges)
    e_nc = e_cc = e_tt = e_ct = ()
    if m:
        if not _all_of_type(edges, tuple, m):
            raise Unusual
        e_nc, e_cc, e_tt, e_ct = zip(*edges, strict=True)
    # Counts: ints (not bools) in [0, 2**63-1]; struct.pack refuses floats and bigger ints.
    count_values = cc + nc + e_nc + e_cc
    if not _all_of_type(count_values, int, len(count_values)):
        raise Unusual
    counts = np.frombuffer(struct.pack(f"{len(count_values)}q", *count_values), np.int64)
    if counts.min() < 0:
        raise Unusual
    # Times: finite floats below 2**63 in size (ints are allowed too, but left to the careful path).
    time_values = tt + ct + e_tt + e_ct
    if not _all_of_type(time_values, float, len(time_values)):
        raise Unusual
    times = np.frombuffer(struct.pack(f"{len(time_values)}d", *time_values), np.float64)
    if not np.abs(times).max() < _TIME_LIMIT:  # NaN fails the comparison too
        raise Unusual
    rows, known = _key_rows(keys + caller_keys)
    callee_rows = np.repeat(rows[:n], list(map(len, callers)))
    return _columns_to_tables(known, np.concatenate((rows[:n], callee_rows, rows[n:])), pa.array(counts),
                              pa.array(times), n, m)


def _columns_to_tables(known: _KnownKeys, rows: np.ndarray, counts: pa.Array, times: pa.Array, n: int,
                       m: int) -> CProfileData:
    """The two tables from rows of the known keys (n functions, m callees, m callers), and the counts and
    times (cc, nc, caller nc, caller cc; tt, ct, caller tt, caller ct)."""
    # One take for the key columns of the functions, their callees and their callers, then slices.
    assert known.columns is not None, "rows of known keys, yet no key columns"
    function, filename, lineno, function_name = known.columns.take(rows).columns
    ids = rows + known.first_id
    functions = pa.Table.from_arrays(
        [function.slice(0, n), filename.slice(0, n), lineno.slice(0, n), function_name.slice(0, n),
         counts.slice(0, n), counts.slice(n, n), times.slice(0, n), times.slice(n, n)],
        schema=_FUNCTIONS_SCHEMA,
    )
    callers_table = pa.Table.from_arrays(
        [function.slice(n, m), filename.slice(n, m), lineno.slice(n, m), function_name.slice(n, m),
         function.slice(n + m), filename.slice(n + m), lineno.slice(n + m), function_name.slice(n + m),
         counts.slice(2 * n, m), counts.slice(2 * n + m), times.slice(2 * n, m), times.slice(2 * n + m)],
        schema=_CALLERS_SCHEMA,
    )
    own_times = memoryview(times.buffers()[1]).cast("d")[times.offset:times.offset + n]
    return CProfileData(functions=functions, callers=callers_table, profiled_seconds=math.fsum(own_times),
                        function_ids=ids[:n], edge_ids=(ids[n:n + m], ids[n + m:]))


# -- the compiled path ------------------------------------------------------------------------------
# _pstats_columns.c reads the marshal bytes straight into counts and times and makes only the keys the
# dump spells out (~400 of a dump's ~660 keys; the rest refer back to them), looking each up in the
# known keys; ~3x faster than marshal.loads alone. It declines (None) whatever is not the common shape,
# by the fast path's rule.
# One thing a column decoder cannot see is a key repeated within a dict, where marshal.loads keeps
# the last value: that is checked here, on the keys' rows.
def compiled_tables(data: bytes) -> CProfileData | None:
    """The compiled decoder's columns; None when it was not built (no C compiler at install)."""
    if _compiled is None:
        return None
    known = _known
    try:
        decoded = _compiled.decode(data, known.row)  # looks each key up in known.row as it reads it
    except ValueError as e:  # never handed to marshal.loads, which may crash on it
        raise Refused(str(e)) from e
    if decoded is None:
        raise Unusual
    keys, function_keys, callee_keys, caller_keys, counts, times, key_row_bytes = decoded
    key_rows: np.ndarray = np.frombuffer(key_row_bytes, np.int64)
    if key_rows.min() < 0:  # keys not seen before
        try:
            key_rows, known = _key_rows(keys)
        except _DECLINE as e:
            raise Unusual from e
    function_rows = key_rows[np.frombuffer(function_keys, np.int64)]
    callee_rows = key_rows[np.frombuffer(callee_keys, np.int64)]
    caller_rows = key_rows[np.frombuffer(caller_keys, np.int64)]
    # A function is one row, so (callee, caller) pairs repeat only if a callers dict repeats a key.
    if _repeats(function_rows) or _repeats(callee_rows * len(known.row) + caller_rows):
        raise Unusual
    return _columns_to_tables(known, np.concatenate((function_rows, callee_rows, caller_rows)),
                              pa.array(np.frombuffer(counts, np.int64)), pa.array(np.frombuffer(times, np.float64)),
                              len(function_rows), len(caller_rows))


def _repeats(values: np.ndarray) -> bool:
    ordered = np.sort(values)
    return bool((ordered[1:] == ordered[:-1]).any())
