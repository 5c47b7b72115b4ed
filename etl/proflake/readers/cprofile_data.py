"""What the cProfile readers share: the raw tuple shapes of a pstats dump, and the columns of one dump."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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


def std_name(key: tuple) -> str:
    """pstats.func_std_string, inlined for speed (built-ins are keyed ('~', 0, name))."""
    filename, lineno, name = key
    if filename == "~" and lineno == 0:
        return "{" + name[1:-1] + "}" if name.startswith("<") and name.endswith(">") else name
    return f"{filename}:{lineno}({name})"
