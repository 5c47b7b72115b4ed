"""cProfile dumps (``python_stats``): marshal bytes -> Arrow columns for function_stats and function_callers.

A dump is ``marshal.dump`` of the pstats dictionary::

    {(filename, lineno, function_name): (cc, nc, tt, ct, {caller_key: (nc, cc, tt, ct)})}

``marshal.loads`` happily returns other objects for crafted or random bytes (code objects, types,
scalars) and ignores trailing garbage, so the decoded value is checked shape by shape before any of it
is used. Nothing from the file is ever executed, unpickled or evaluated.
"""

from __future__ import annotations

import marshal
import math
import pstats
from dataclasses import dataclass

import pyarrow as pa

from etl.errors import ParseError

FunctionKey = tuple[str, int, str]  # (filename, lineno, function_name)
CallerValue = tuple[int, int, float, float]  # (nc, cc, tt, ct) as cProfile records per caller
FunctionValue = tuple[int, int, float, float, dict]  # (cc, nc, tt, ct, callers)


@dataclass(frozen=True)
class CProfileData:
    """Columns of one dump, without interval keys (the ingest adds those)."""

    functions: pa.Table  # function_stats' own columns
    callers: pa.Table  # function_callers' own columns
    profiled_seconds: float


def _bad(message: str) -> ParseError:
    return ParseError("cprofile", f"not a cProfile stats dump: {message}")


def _check_key(key: object) -> FunctionKey:
    if (
        type(key) is not tuple
        or len(key) != 3
        or type(key[0]) is not str
        or type(key[1]) is not int
        or type(key[2]) is not str
    ):
        raise _bad(f"function key {_preview(key)} is not (filename, lineno, name)")
    return key  # type: ignore[return-value]


_INT64_MAX = 2**63 - 1


def _is_number(x: object) -> bool:
    return (type(x) is float and math.isfinite(x)) or (type(x) is int and abs(x) <= _INT64_MAX)


def _is_count(x: object) -> bool:
    return type(x) is int and 0 <= x <= _INT64_MAX


def _preview(value: object) -> str:
    text = repr(value) if isinstance(value, (tuple, str, int, float)) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def decode(data: bytes) -> dict[FunctionKey, FunctionValue]:
    """Decode and validate a dump; raise ParseError for anything that is not a pstats dictionary."""
    if not data:
        raise _bad("the file is empty")
    try:
        stats = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as e:
        raise _bad(f"marshal data is corrupt ({e})") from e
    if type(stats) is not dict:
        raise _bad(f"top level is {type(stats).__name__}, expected a dict")
    for key, value in stats.items():
        _check_key(key)
        if type(value) is not tuple or len(value) != 5:
            raise _bad(f"entry for {_preview(key)} is not (cc, nc, tt, ct, callers)")
        cc, nc, tt, ct, callers = value
        if not _is_count(cc) or not _is_count(nc) or not _is_number(tt) or not _is_number(ct):
            raise _bad(f"counts or times of {_preview(key)} are not numbers")
        if type(callers) is not dict:
            raise _bad(f"callers of {_preview(key)} are not a dict")
        for caller, edge in callers.items():
            _check_key(caller)
            if (
                type(edge) is not tuple
                or len(edge) != 4
                or not _is_count(edge[0])
                or not _is_count(edge[1])
                or not _is_number(edge[2])
                or not _is_number(edge[3])
            ):
                raise _bad(f"caller edge {_preview(caller)} -> {_preview(key)} is not (nc, cc, tt, ct)")
    return stats


def read_cprofile(data: bytes) -> CProfileData:
    """Parse a cProfile dump into column tables (see schemas/function_stats.json, function_callers.json)."""
    stats = decode(data)
    try:
        return _columns(stats)
    except UnicodeEncodeError as e:  # marshal can carry lone surrogates, which are not text
        raise _bad("a function or file name is not valid Unicode") from e


def _columns(stats: dict[FunctionKey, FunctionValue]) -> CProfileData:
    keys = list(stats)
    values = list(stats.values())
    names = [pstats.func_std_string(k) for k in keys]
    name_of = dict(zip(keys, names))

    if keys:
        filenames, linenos, function_names = zip(*keys)
        cc, nc, tt, ct, callers = zip(*values)
    else:
        filenames = linenos = function_names = cc = nc = tt = ct = callers = ()
    functions = pa.table(
        {
            "function": pa.array(names, pa.string()),
            "filename": pa.array(filenames, pa.string()),
            "lineno": pa.array(linenos, pa.int64()),
            "function_name": pa.array(function_names, pa.string()),
            "primitive_calls": pa.array(cc, pa.int64()),
            "total_calls": pa.array(nc, pa.int64()),
            "tottime": pa.array([float(x) for x in tt], pa.float64()),
            "cumtime": pa.array([float(x) for x in ct], pa.float64()),
        }
    )

    callee_index: list[int] = []
    caller_keys: list[FunctionKey] = []
    edges: list[CallerValue] = []
    for i, caller_map in enumerate(callers):
        if caller_map:
            callee_index.extend([i] * len(caller_map))
            caller_keys.extend(caller_map)
            edges.extend(caller_map.values())
    if edges:
        c_files, c_lines, c_names = zip(*caller_keys)
        e_nc, e_cc, e_tt, e_ct = zip(*edges)
    else:
        c_files = c_lines = c_names = e_nc = e_cc = e_tt = e_ct = ()
    take = pa.array(callee_index, pa.int64())
    caller_table = pa.table(
        {
            "function": functions["function"].take(take),
            "filename": functions["filename"].take(take),
            "lineno": functions["lineno"].take(take),
            "function_name": functions["function_name"].take(take),
            "caller_function": pa.array(
                [name_of.get(k) or pstats.func_std_string(k) for k in caller_keys], pa.string()
            ),
            "caller_filename": pa.array(c_files, pa.string()),
            "caller_lineno": pa.array(c_lines, pa.int64()),
            "caller_function_name": pa.array(c_names, pa.string()),
            "total_calls": pa.array(e_nc, pa.int64()),
            "primitive_calls": pa.array(e_cc, pa.int64()),
            "tottime": pa.array([float(x) for x in e_tt], pa.float64()),
            "cumtime": pa.array([float(x) for x in e_ct], pa.float64()),
        }
    )
    return CProfileData(functions=functions, callers=caller_table, profiled_seconds=math.fsum(map(float, tt)))
