"""cProfile dumps (``python_stats``): marshal bytes -> Arrow columns for function_stats and function_callers.

A dump is ``marshal.dump`` of the pstats dictionary::

    {(filename, lineno, function_name): (cc, nc, tt, ct, {caller_key: (nc, cc, tt, ct)})}

``marshal.loads`` happily returns other objects for crafted or random bytes (code objects, types,
scalars) and ignores trailing garbage, so the decoded value is checked shape by shape before any of it
is used. Nothing from the file is ever executed, unpickled or evaluated.

Two paths share that contract: a fast one for the common shape (see "the fast path" below) and the
careful one, which names the first bad value and handles everything the fast one declines.
"""

from __future__ import annotations

import marshal
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np
import pyarrow as pa

from proflake.errors import ParseError

try:  # built from _pstats_columns.c at install; without a C compiler, the Python paths below do its work
    from proflake.readers import _pstats_columns as _compiled
except ImportError:
    _compiled = None

FunctionKey = tuple[str, int, str]  # (filename, lineno, function_name)
CallerValue = tuple[int, int, float, float]  # (nc, cc, tt, ct) as cProfile records per caller
FunctionValue = tuple[int, int, float, float, dict]  # (cc, nc, tt, ct, callers)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class CProfileData:
    """Columns of one dump, without interval keys (the ingest adds those)."""

    functions: pa.Table  # function_stats' own columns
    callers: pa.Table  # function_callers' own columns
    profiled_seconds: float
    # Integer ids of the functions' keys, and of each caller edge's callee and caller, where the fast
    # paths know them: equal ids are equal keys for the life of the process (see _KnownKeys), so the
    # worker sums by ids instead of hashing the key text. None from the careful path.
    function_ids: np.ndarray | None = None
    edge_ids: tuple[np.ndarray, np.ndarray] | None = None


def _bad(message: str) -> ParseError:
    return ParseError("cprofile", f"not a cProfile stats dump: {message}")


def _preview(value: object) -> str:
    text = repr(value) if isinstance(value, (tuple, str, int, float)) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def decode(data: bytes) -> dict[FunctionKey, FunctionValue]:
    """Decode and validate a dump; raise ParseError for anything that is not a pstats dictionary."""
    stats = _load(data)
    _validate(list(stats), list(stats.values()))
    return stats


def _load(data: bytes) -> dict:
    if not data:
        raise _bad("the file is empty")
    try:
        stats = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as e:
        raise _bad(f"marshal data is corrupt ({e})") from e
    if type(stats) is not dict:
        raise _bad(f"top level is {type(stats).__name__}, expected a dict")
    return stats


# Validation works column by column with builtins (map, set, min, max) that loop in C: a dump holds
# thousands of entries, and checking each one in Python would cost more than decoding it.
def _columns_of(rows: list, width: int, what: str) -> tuple[tuple, ...]:
    if rows and (set(map(type, rows)) != {tuple} or set(map(len, rows)) != {width}):
        bad = next(r for r in rows if type(r) is not tuple or len(r) != width)
        raise _bad(f"{what} {_preview(bad)} does not have {width} fields")
    return tuple(zip(*rows)) if rows else ((),) * width


def _check_types(column: tuple, allowed: set, what: str) -> None:
    if column and not set(map(type, column)) <= allowed:
        bad = next(v for v in column if type(v) not in allowed)
        raise _bad(f"{what} {_preview(bad)} is not a {' or '.join(sorted(t.__name__ for t in allowed))}")


def _check_counts(column: tuple, what: str) -> None:
    _check_types(column, {int}, what)
    if column and (min(column) < 0 or max(column) > _INT64_MAX):
        raise _bad(f"{what} are not all counts between 0 and 2**63-1")


def _check_times(column: tuple, what: str) -> None:
    _check_types(column, {int, float}, what)
    if column and not all(map(math.isfinite, column)):
        raise _bad(f"{what} are not all finite numbers")
    if column and (min(column) < -_INT64_MAX or max(column) > _INT64_MAX):
        raise _bad(f"{what} are out of range")


def _validate(keys: list, values: list) -> tuple:
    """Check the shape of a pstats dictionary; return its columns and its callers flattened."""
    filenames, linenos, function_names = _columns_of(keys, 3, "function key")
    _check_types(filenames, {str}, "file name")
    _check_types(function_names, {str}, "function name")
    _check_counts(linenos, "line numbers")
    cc, nc, tt, ct, callers = _columns_of(values, 5, "entry (cc, nc, tt, ct, callers)")
    _check_counts(cc, "primitive call counts")
    _check_counts(nc, "call counts")
    _check_times(tt, "own times")
    _check_times(ct, "cumulative times")
    _check_types(callers, {dict}, "callers")
    caller_keys = [k for c in callers for k in c]
    edges = [e for c in callers for e in c.values()]
    c_files, c_lines, c_names = _columns_of(caller_keys, 3, "caller key")
    _check_types(c_files, {str}, "caller file name")
    _check_types(c_names, {str}, "caller function name")
    _check_counts(c_lines, "caller line numbers")
    e_nc, e_cc, e_tt, e_ct = _columns_of(edges, 4, "caller edge (nc, cc, tt, ct)")
    _check_counts(e_nc, "caller call counts")
    _check_counts(e_cc, "caller primitive call counts")
    _check_times(e_tt, "caller own times")
    _check_times(e_ct, "caller cumulative times")
    return (filenames, linenos, function_names, cc, nc, tt, ct, callers), (caller_keys, c_files, c_lines, c_names, e_nc, e_cc, e_tt, e_ct)


def read_cprofile(data: bytes) -> CProfileData:
    """Parse a cProfile dump into column tables (see schemas/function_stats.json, function_callers.json)."""
    if _compiled is not None:
        try:
            return _compiled_tables(data)
        except _Unusual:
            pass
        except _Refused as e:
            raise _bad(str(e)) from None
    stats = _load(data)
    try:
        return _fast_tables(stats)
    except _Unusual:
        pass  # raise the careful path's errors outside this handler, without its context
    return _careful_tables(stats)


def _careful_tables(stats: dict) -> CProfileData:
    """Check field by field, naming the first bad value; also converts the rare valid shapes the fast
    path (below) declines, such as integer times."""
    keys = list(stats)
    functions_columns, caller_columns = _validate(keys, list(stats.values()))
    try:
        return _tables(keys, functions_columns, caller_columns)
    except UnicodeEncodeError as e:  # marshal can carry lone surrogates, which are not text
        raise _bad("a function or file name is not valid Unicode") from e


def _std_name(key: tuple) -> str:
    """pstats.func_std_string, inlined for speed (built-ins are keyed ('~', 0, name))."""
    filename, lineno, name = key
    if filename == "~" and lineno == 0:
        return "{%s}" % name[1:-1] if name.startswith("<") and name.endswith(">") else name
    return f"{filename}:{lineno}({name})"


def _floats(column: tuple) -> pa.Array:
    # Integer times (allowed by pstats) may exceed a double's exact range: convert them explicitly.
    if float in set(map(type, column)) and int not in set(map(type, column)):
        return pa.array(column, pa.float64())
    return pa.array(list(map(float, column)), pa.float64())


def _tables(keys: list, functions_columns: tuple, caller_columns: tuple) -> CProfileData:
    filenames, linenos, function_names, cc, nc, tt, ct, callers = functions_columns
    caller_keys, c_files, c_lines, c_names, e_nc, e_cc, e_tt, e_ct = caller_columns
    names = list(map(_std_name, keys))
    functions = pa.table(
        {
            "function": pa.array(names, pa.string()),
            "filename": pa.array(filenames, pa.string()),
            "lineno": pa.array(linenos, pa.int64()),
            "function_name": pa.array(function_names, pa.string()),
            "primitive_calls": pa.array(cc, pa.int64()),
            "total_calls": pa.array(nc, pa.int64()),
            "tottime": _floats(tt),
            "cumtime": _floats(ct),
        }
    )
    callee_index = pa.array(np.repeat(np.arange(len(keys), dtype=np.int64), list(map(len, callers))))
    caller_table = pa.table(
        {
            "function": functions["function"].take(callee_index),
            "filename": functions["filename"].take(callee_index),
            "lineno": functions["lineno"].take(callee_index),
            "function_name": functions["function_name"].take(callee_index),
            "caller_function": pa.array(list(map(_std_name, caller_keys)), pa.string()),
            "caller_filename": pa.array(c_files, pa.string()),
            "caller_lineno": pa.array(c_lines, pa.int64()),
            "caller_function_name": pa.array(c_names, pa.string()),
            "total_calls": pa.array(e_nc, pa.int64()),
            "primitive_calls": pa.array(e_cc, pa.int64()),
            "tottime": _floats(e_tt),
            "cumtime": _floats(e_ct),
        }
    )
    return CProfileData(functions=functions, callers=caller_table, profiled_seconds=math.fsum(map(float, tt)))


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


class _Unusual(Exception):
    """The fast path declines this dump; the careful path decides."""


class _Refused(Exception):
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
    """Rows of ``keys`` (one or more) in the known key columns, adding new keys; _Unusual if a key is bad."""
    global _known
    # Lookups match by equality, and 1.0, True and 1+0j all equal 1: a known key proves the strings
    # (only a str equals a str) but not the line number's type.
    if not _all_of_type(map(itemgetter(1), keys), int, len(keys)):
        raise _Unusual
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
        raise _Unusual
    filenames, linenos, function_names = zip(*new)
    if not (_all_of_type(filenames, str, len(new)) and _all_of_type(function_names, str, len(new))):
        raise _Unusual
    if min(linenos) < 0 or max(linenos) > _INT64_MAX:
        raise _Unusual
    added = pa.RecordBatch.from_arrays(  # encoding raises on lone surrogates
        [pa.array(list(map(_std_name, new)), pa.string()), pa.array(filenames, pa.string()),
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


def _fast_tables(stats: dict) -> CProfileData:
    try:
        return _fast_tables_or_raise(stats)
    except _DECLINE as e:
        raise _Unusual from e


def _fast_tables_or_raise(stats: dict) -> CProfileData:
    n = len(stats)
    if not n:
        raise _Unusual
    keys = list(stats)
    values = list(stats.values())
    if not _all_of_type(values, tuple, n):
        raise _Unusual
    cc, nc, tt, ct, callers = zip(*values, strict=True)  # ValueError unless all have 5 fields
    edges = list(chain.from_iterable(map(dict.values, callers)))  # TypeError unless all are dicts
    caller_keys = list(chain.from_iterable(callers))
    m = len(edges)
    e_nc = e_cc = e_tt = e_ct = ()
    if m:
        if not _all_of_type(edges, tuple, m):
            raise _Unusual
        e_nc, e_cc, e_tt, e_ct = zip(*edges, strict=True)
    # Counts: ints (not bools) in [0, 2**63-1]; struct.pack refuses floats and bigger ints.
    counts = cc + nc + e_nc + e_cc
    if not _all_of_type(counts, int, len(counts)):
        raise _Unusual
    counts = np.frombuffer(struct.pack(f"{len(counts)}q", *counts), np.int64)
    if counts.min() < 0:
        raise _Unusual
    # Times: finite floats below 2**63 in size (ints are allowed too, but left to the careful path).
    times = tt + ct + e_tt + e_ct
    if not _all_of_type(times, float, len(times)):
        raise _Unusual
    times = np.frombuffer(struct.pack(f"{len(times)}d", *times), np.float64)
    if not np.abs(times).max() < _TIME_LIMIT:  # NaN fails the comparison too
        raise _Unusual
    rows, known = _key_rows(keys + caller_keys)
    callee_rows = np.repeat(rows[:n], list(map(len, callers)))
    return _columns_to_tables(known, np.concatenate((rows[:n], callee_rows, rows[n:])), pa.array(counts),
                              pa.array(times), n, m)


def _columns_to_tables(known: _KnownKeys, rows: np.ndarray, counts: pa.Array, times: pa.Array, n: int,
                       m: int) -> CProfileData:
    """The two tables from rows of the known keys (n functions, m callees, m callers), and the counts and
    times (cc, nc, caller nc, caller cc; tt, ct, caller tt, caller ct)."""
    # One take for the key columns of the functions, their callees and their callers, then slices.
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
def _compiled_tables(data: bytes) -> CProfileData:
    known = _known
    try:
        decoded = _compiled.decode(data, known.row)  # looks each key up in known.row as it reads it
    except ValueError as e:  # never handed to marshal.loads, which may crash on it
        raise _Refused(str(e)) from e
    if decoded is None:
        raise _Unusual
    keys, function_keys, callee_keys, caller_keys, counts, times, key_rows = decoded
    key_rows = np.frombuffer(key_rows, np.int64)
    if key_rows.min() < 0:  # keys not seen before
        try:
            key_rows, known = _key_rows(keys)
        except _DECLINE as e:
            raise _Unusual from e
    function_rows = key_rows[np.frombuffer(function_keys, np.int64)]
    callee_rows = key_rows[np.frombuffer(callee_keys, np.int64)]
    caller_rows = key_rows[np.frombuffer(caller_keys, np.int64)]
    # A function is one row, so (callee, caller) pairs repeat only if a callers dict repeats a key.
    if _repeats(function_rows) or _repeats(callee_rows * len(known.row) + caller_rows):
        raise _Unusual
    return _columns_to_tables(known, np.concatenate((function_rows, callee_rows, caller_rows)),
                              pa.array(np.frombuffer(counts, np.int64)), pa.array(np.frombuffer(times, np.float64)),
                              len(function_rows), len(caller_rows))


def _repeats(values: np.ndarray) -> bool:
    ordered = np.sort(values)
    return bool((ordered[1:] == ordered[:-1]).any())
