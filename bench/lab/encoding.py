"""Which Parquet encoding the measured-time columns get: size and DuckDB read speed, same rows.

    python -m bench.lab.encoding STORE [--rounds 5] [--spark]

Rewrites every committed file of the store's fact tables once per candidate encoding with the store's own
writer settings (etl/proflake/store/store.py writer_properties(); only the time columns' encoding differs),
then reports each candidate's bytes and the median time DuckDB takes for a roll-up over all rows (sum
of each time column per function), the candidates alternated round by round so host drift hits each
alike. ``--spark`` also reads each candidate's files with Spark's default (vectorized) Parquet reader.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from proflake.store.deltawrite import parquet_options, write_data_file
from proflake.store.store import _MEASURED_FLOATS, FACT_TABLES, Store, writer_properties

CANDIDATES = ("BYTE_STREAM_SPLIT", "PLAIN")
_SUMS = {
    "function_stats": "sum(tottime), sum(cumtime)",
    "function_callers": "sum(tottime), sum(cumtime)",
    "pyinstrument_frames": "sum(time), sum(self_time), sum(await_time)",
}


def rewrite(store: Store, out: Path, encoding: str) -> dict[str, list[str]]:
    """Each fact table's files rewritten with the time columns in ``encoding``: table -> paths."""
    options = parquet_options(writer_properties())
    options["_encodings"] = {c: encoding for c in _MEASURED_FLOATS}
    written: dict[str, list[str]] = {}
    for name in FACT_TABLES:
        folder = out / encoding / name
        folder.mkdir(parents=True)
        written[name] = []
        for uri in store.delta(name).file_uris():
            table = pq.read_table(uri)
            written[name].append(write_data_file(name, table, str(folder), "bench", options).local_path)
    return written


def measure(store_location: str, rounds: int, spark: bool) -> None:
    store = Store(store_location)
    scratch = Path(tempfile.mkdtemp(prefix="proflake-encoding-"))
    try:
        files = {encoding: rewrite(store, scratch, encoding) for encoding in CANDIDATES}
        con = duckdb.connect()
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for encoding in CANDIDATES:
                for name, paths in files[encoding].items():
                    if not paths:
                        continue
                    start = time.perf_counter()
                    con.execute(f"SELECT function, {_SUMS[name]} FROM read_parquet($f) GROUP BY function", {"f": paths}).fetchall()
                    times.setdefault((encoding, name), []).append(time.perf_counter() - start)
        print(f"{'table':22} {'encoding':18} {'MB':>8} {'DuckDB roll-up ms (median of ' + str(rounds) + ')':>34}")
        for name in FACT_TABLES:
            for encoding in CANDIDATES:
                size = sum(Path(p).stat().st_size for p in files[encoding][name]) / 1e6
                runs = times.get((encoding, name), [float("nan")])
                print(f"{name:22} {encoding:18} {size:8.2f} {statistics.median(runs) * 1e3:34.1f}")
        if spark:
            _spark_reads(files)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _spark_reads(files: dict[str, dict[str, list[str]]]) -> None:
    import os

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    for encoding, tables in files.items():
        for name, paths in tables.items():
            if not paths:
                continue
            try:
                rows = spark.read.parquet(*paths).selectExpr(*_SUMS[name].split(", ")).collect()
                print(f"Spark default reader, {name} {encoding}: read, sums {tuple(rows[0])}")
            except Exception as e:  # the answer here is whether it fails, and how
                print(f"Spark default reader, {name} {encoding}: FAILS: {str(e).strip().splitlines()[0][:160]}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()
    measure(args.store, args.rounds, args.spark)


if __name__ == "__main__":
    main()
