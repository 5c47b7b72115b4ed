"""cProfile dumps (``python_stats``): marshal bytes -> Arrow columns for function_stats and function_callers.

A dump is ``marshal.dump`` of the pstats dictionary::

    {(filename, lineno, function_name): (cc, nc, tt, ct, {caller_key: (nc, cc, tt, ct)})}

``marshal.loads`` happily returns other objects for crafted or random bytes (code objects, types,
scalars) and ignores trailing garbage, so the decoded value is checked shape by shape before any of it
is used. Nothing from the file is ever executed, unpickled or evaluated.

Two paths share that contract: a fast one for the common shape (see "the fast path" below) and the
careful one, which names the first bad value and handles everything the fast one declines. The fast and
compiled paths live in cprofile_fast.py, the shared shapes in cprofile_data.py.
"""

from __future__ import annotations

import marshal
import math

import numpy as np
import pyarrow as pa

from proflake.errors import ParseError
from proflake.readers.cprofile_data import (
    _INT64_MAX,
    CProfileData,
    FunctionKey,
    FunctionValue,
    std_name,
)
from proflake.readers.cprofile_fast import Refused, Unusual, compiled_tables, fast_tables, refuse_unsafe
from proflake.readers.cprofile_fast import _compiled as _compiled  # noqa: F401 - what the bench reports


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
        refuse_unsafe(data)  # marshal.loads must never see what could crash it, whoever calls
    except Refused as e:
        raise _bad(str(e)) from None
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
    try:
        compiled = compiled_tables(data)
    except Unusual:
        compiled = None
    except Refused as e:
        raise _bad(str(e)) from None
    if compiled is not None:
        return compiled
    stats = _load(data)
    try:
        return fast_tables(stats)
    except Unusual:
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


def _floats(column: tuple) -> pa.Array:
    # Integer times (allowed by pstats) may exceed a double's exact range: convert them explicitly.
    if float in set(map(type, column)) and int not in set(map(type, column)):
        return pa.array(column, pa.float64())
    return pa.array(list(map(float, column)), pa.float64())


def _tables(keys: list, functions_columns: tuple, caller_columns: tuple) -> CProfileData:
    filenames, linenos, function_names, cc, nc, tt, ct, callers = functions_columns
    caller_keys, c_files, c_lines, c_names, e_nc, e_cc, e_tt, e_ct = caller_columns
    names = list(map(std_name, keys))
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
            "caller_function": pa.array(list(map(std_name, caller_keys)), pa.string()),
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
