"""A reader for the data-safety tests: asks the store the same questions in a loop while writers run and
are killed, and appends each answer (or the error) as one JSON line to a file, until a stop file appears.

Usage: python safety_reader.py STORE OUT STOP
"""

from __future__ import annotations

import json
import os
import sys

from proflake import Profiles
from proflake.store.store import Store


def answer(store: str) -> dict:
    con = Store(store).connect()
    try:
        calls, rows = con.sql("SELECT sum(total_calls), count(*) FROM function_stats").fetchall()[0]
        frames = con.sql("SELECT count(*) FROM pyinstrument_frames").fetchall()[0][0]
        intervals = con.sql("SELECT count(*) FROM intervals").fetchall()[0][0]
    finally:
        con.close()
    step = Profiles(store).by_step(1, all_jobs=True).table
    return {
        "calls": int(calls or 0), "rows": rows, "frames": frames, "intervals": intervals,
        "by_step_calls": int(sum(step.column("total_calls").to_pylist())) if step.num_rows else 0,
    }


def main(store: str, out: str, stop: str) -> None:
    with open(out, "a", encoding="utf-8") as f:
        while not os.path.exists(stop):
            try:
                line = answer(store)
            except Exception as e:  # noqa: BLE001 (every error is an answer the test rejects
                line = {"error": f"{type(e).__name__}: {e}"}
            f.write(json.dumps(line, sort_keys=True) + "\n")
            f.flush()


if __name__ == "__main__":
    main(*sys.argv[1:4])
