"""Comparing two engines' or two ingests' answers: the fetch cases that cover every fetch method, and
tables equal row for row with floats within 1e-12 relative (sums taken in different orders)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

REL = 1e-12

FETCH_CASES = [
    ("by_time", {"start_time_s": 0.0025, "end_time_s": 0.0045}),
    ("by_step", {"start_step": 1, "end_step": 2}),
    ("by_step", {"start_step": "*", "end_step": "*"}),
    ("between_modes", {"start_mode": "train", "end_mode": "eval"}),
    ("pre_step_zero", {}),
    ("post_hook_close", {}),
    ("by_training_phase", {}),
    ("by_job_phase", {}),
]


def assert_same_table(actual: pa.Table, expected: pa.Table, *, ordered: bool = True) -> None:
    """Same columns, same rows; floats within REL (two engines sum in different orders)."""
    assert actual.column_names == expected.column_names
    a, e = actual.to_pylist(), expected.to_pylist()
    if not ordered:
        a, e = sorted(a, key=_row_key), sorted(e, key=_row_key)
    assert len(a) == len(e)
    for row_a, row_e in zip(a, e):
        for column in expected.column_names:
            x, y = row_a[column], row_e[column]
            if isinstance(y, float) and isinstance(x, float):
                assert x == pytest.approx(y, rel=REL, abs=1e-15) or (math.isnan(x) and math.isnan(y)), column
            else:
                assert x == y, (column, x, y)


def _row_key(row: dict) -> tuple:
    return tuple((v is None, str(v) if not isinstance(v, float) else f"{v:.9e}") for v in row.values())
