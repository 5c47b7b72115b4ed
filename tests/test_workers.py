"""Parse workers: a crash, hang or memory blow-up costs one file, never the batch; the fact files they
write hold every parsed file's rows exactly once, sorted, with the statistics deltalake would write."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from helpers.crashy_facts import ROWS_PER_FILE
from proflake.schema import INTERVAL_KEY_COLUMNS, arrow_schema
from proflake.store.deltawrite import commit_data_files, parquet_options, write_data_file
from proflake.store.store import Store, writer_properties
from proflake.workers.pool import ParsePool
from proflake.workers.protocol import FactSink, Failure, ParsedFile, Task


@pytest.mark.parametrize("workers", [1, 2])
def test_misbehaving_files_cost_only_themselves(workers):
    payloads = [b"ok-%d" % i for i in range(40)]
    bad = {7: (b"segfault", "crash"), 13: (b"hang", "timeout"), 21: (b"hog", "memory"), 30: (b"exit", "crash")}
    for index, (data, _) in bad.items():
        payloads[index] = data
    with ParsePool(workers, memory_mb=512, timeout_s=1.5, parse="helpers.crashy:parse") as pool:
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", data) for i, data in enumerate(payloads)) for o in chunk.outcomes)
    assert sorted(results) == list(range(40))
    for index, result in results.items():
        if index in bad:
            assert result.kind == bad[index][1], (index, result)
        else:
            assert result == {"profiler": "cprofile", "size": len(payloads[index])}
    assert "signal 11" in results[7].message


@pytest.mark.parametrize("start", ["forked", "own-interpreter"])
def test_a_worker_slow_to_die_after_sigkill_costs_its_file_not_the_batch(monkeypatch, start):
    """A killed worker not yet reaped when the wait runs out (> 10 s was seen at load 25) is left to be
    reaped: by a reaping thread when it is our child, by its template when it was forked from one. The
    batch finishes with the same outcomes, and no worker is left unreaped. Here every bounded wait of a
    killed worker runs out at once, as if the kernel were slow (a wait of 0 s alone is a race: a SIGKILLed
    process is often gone before it starts); the reaping thread's and the test's waits are the real ones."""
    import subprocess
    import threading

    from proflake.workers import pool as pool_module
    from proflake.workers import template

    def slow(real):
        def slow_to_die(self, timeout: float | None = None) -> int:
            if timeout == pool_module.KILL_WAIT_S:
                raise subprocess.TimeoutExpired("parse worker", timeout)
            return real(self, timeout)
        return slow_to_die

    monkeypatch.setattr(template, "AVAILABLE", start == "forked")
    # A worker environment of its own (a setting pool._WORKER_SETTINGS counts): no idle worker of
    # another test is reused.
    monkeypatch.setenv("LC_PROFLAKE_TEST_WORKER_START", start)
    template._STARTED_ALONE.add(pool_module._environment())  # its first worker started alone already
    monkeypatch.setattr(template.ForkedProcess, "wait", slow(template.ForkedProcess.wait))
    monkeypatch.setattr(pool_module, "KILL_WAIT_S", 0.0)
    monkeypatch.setattr(subprocess.Popen, "wait", slow(subprocess.Popen.wait))
    reapers: list[threading.Thread] = []
    killed: list = []

    class CountedThread(threading.Thread):
        def start(self) -> None:
            reapers.append(self)
            super().start()

    monkeypatch.setattr(pool_module.threading, "Thread", CountedThread)
    reap = pool_module._reap
    monkeypatch.setattr(pool_module, "_reap", lambda process: (killed.append(process), reap(process)))
    payloads = [b"ok-%d" % i for i in range(6)]
    payloads[3] = b"hang"
    with ParsePool(1, memory_mb=512, timeout_s=0.5, parse="helpers.crashy:parse") as pool:
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", data) for i, data in enumerate(payloads)) for o in chunk.outcomes)
    assert sorted(results) == list(range(6))
    assert results[3].kind == "timeout"
    assert all(results[i] == {"profiler": "cprofile", "size": len(payloads[i])} for i in results if i != 3)
    assert killed and all(isinstance(p, template.ForkedProcess) == (start == "forked") for p in killed)
    if start == "forked":
        assert not reapers  # the template reaps what it forked: the exit code comes from it
        assert all(process.wait(timeout=30) == -signal.SIGKILL for process in killed)
        return
    assert reapers, "no kill took the reaping thread's path"
    for reaper in reapers:
        reaper.join(timeout=30)
        assert not reaper.is_alive()


def test_an_idle_worker_is_reused_only_with_the_environment_it_was_started_with(monkeypatch):
    """A worker kept from a run before os.environ changed a setting its libraries read (the time zone)
    must not serve the next run; settings it never reads (pytest's, proflake's knobs, S3's: the parent
    reads S3 and commits) keep it."""
    def pids() -> set[int]:
        with ParsePool(1, parse="helpers.crashy:parse") as pool:
            list(pool.parse([Task(0, "cprofile", b"ok")]))
            return {w.process.pid for w in pool._workers}

    first = pids()
    assert pids() == first  # the same environment: the idle worker is reused
    for name, value in (("PYTEST_CURRENT_TEST", "another test"), ("PROFLAKE_FLUSH_ROWS", "10"),
                        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1")):
        monkeypatch.setenv(name, value)  # what workers do not read does not count
        assert pids() == first, name
    monkeypatch.setenv("TZ", "America/New_York")
    changed = pids()
    assert changed.isdisjoint(first)
    monkeypatch.delenv("TZ")
    assert pids() == first  # back to the first environment: its worker again


def test_no_module_a_worker_imports_reads_the_environment():
    """What makes reusing a worker, or its template, across environments safe (pool._WORKER_SETTINGS):
    none of proflake's modules a worker process imports reads os.environ or getenv, whether it was
    started alone (WORKER_BOOT) or forked from a template that imported its own loop first (TEMPLATE_BOOT)."""
    import re
    import subprocess
    import sys

    from proflake.workers.template_process import TEMPLATE_BOOT, WORKER_BOOT

    imports = [boot.splitlines()[-2] for boot in (WORKER_BOOT, TEMPLATE_BOOT)]
    assert all(line.startswith("from proflake.workers.") for line in imports), imports
    listing = WORKER_BOOT.rpartition(imports[0])[0] + "\n".join(imports) + (
        "\nimport helpers.crashy, helpers.crashy_facts\n"
        "print('\\n'.join(m.__file__ for n, m in sorted(sys.modules.items()) if n.startswith('proflake') and m.__file__))")
    done = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    files = [f for f in done.stdout.split() if f.endswith(".py")]
    for module in ("worker.py", "template_process.py"):
        assert any(f.endswith(os.path.join("workers", module)) for f in files), files
    readers = [f for f in files if re.search(r"\benviron\b|getenv", Path(f).read_text())]
    assert readers == [], "a worker now reads its environment: add what it reads to pool._WORKER_SETTINGS"


def test_real_parser_in_workers_reports_parse_errors():
    with ParsePool(2) as pool:
        chunks = list(pool.parse([Task(0, "cprofile", b"junk"), Task(1, "pyinstrument", b'{"root_frame": null}')]))
        results = dict(o for chunk in chunks for o in chunk.outcomes)
    assert results[0].kind == "cprofile" and "not a cProfile stats dump" in results[0].message
    assert results[1].summary["is_empty"] is True


def _interval(n: int) -> tuple:
    """Interval keys that sort against the file order: the files' rows must come out sorted anyway.
    Nodes come in runs of 100 tasks, as ingest orders them (job, node, start time)."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=1000 - n)
    keys = {
        "interval_id": f"i{n:03d}", "batch_id": "b", "job_id": "job", "framework": "pytorch",
        "node_id": f"algo-{n // 100}", "start_mode": "train", "start_step": n, "start_phase": "stepstart",
        "start_time_us": start.timestamp() * 1e6, "start_time": start, "end_mode": "train",
        "end_step": None if n % 5 == 0 else n, "end_phase": "stepend", "end_time_us": start.timestamp() * 1e6 + 1,
        "end_time": start, "job_phase": "training_loop",
    }
    return tuple(keys[c] for c in INTERVAL_KEY_COLUMNS)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("flush_files", [3, 1000], ids=["writing-often", "writing-at-the-end"])
def test_written_facts_hold_every_parsed_file_once_even_when_a_worker_dies(tmp_path, workers, flush_files):
    """A worker that dies loses the rows it had not written: those files are parsed again elsewhere,
    and each good file's rows land in exactly one of the files to commit."""
    options = parquet_options(writer_properties())
    sink = FactSink({"pyinstrument_frames": str(tmp_path)}, "b", flush_files * ROWS_PER_FILE, options)
    payloads = [str(i).encode() for i in range(60)]
    payloads[41] = b"segfault"
    tasks = [Task(i, "pyinstrument", data, _interval(i)) for i, data in enumerate(payloads)]
    with ParsePool(workers, memory_mb=1024, parse="helpers.crashy_facts:parse") as pool:
        results = list(pool.parse(tasks, sink))
    outcomes = dict(o for r in results for o in r.outcomes)
    assert sorted(outcomes) == list(range(60))
    assert isinstance(outcomes[41], Failure) and outcomes[41].kind == "crash"
    assert all(isinstance(outcomes[i], ParsedFile) for i in outcomes if i != 41)
    files = [f for r in results for f in r.files]
    rows = pa.concat_tables([pq.read_table(f.local_path) for f in files])
    assert rows.num_rows == 59 * ROWS_PER_FILE == sum(f.rows for f in files)
    counts = rows.group_by("interval_id").aggregate([("frame_id", "count")]).to_pydict()
    assert sorted(counts["interval_id"]) == [f"i{i:03d}" for i in range(60) if i != 41]
    assert set(counts["frame_id_count"]) == {ROWS_PER_FILE}
    for f in files:  # rows in the table's order, whatever order the files were parsed in
        keys = pq.read_table(f.local_path, columns=["job_id", "node_id", "start_time_us"]).to_pylist()
        assert keys == sorted(keys, key=lambda k: (k["job_id"], k["node_id"], k["start_time_us"]))
        assert json.loads(f.stats)["numRecords"] == f.rows


def test_parquet_options_are_the_store_writer_properties(tmp_path):
    table = pa.table({"function": ["a", "b"] * 100_000, "tottime": [0.5, 0.25] * 100_000})
    written = write_data_file("function_stats", table, str(tmp_path), "b", parquet_options(writer_properties()))
    metadata = pq.read_metadata(written.local_path)
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [131_072, 68_928]
    function, tottime = metadata.row_group(0).column(0), metadata.row_group(0).column(1)
    assert function.compression == tottime.compression == "ZSTD"
    assert function.has_dictionary_page and not tottime.has_dictionary_page
    # PLAIN, so every Spark reads the store with its default (vectorized) reader: docs/spark.md
    assert "PLAIN" in tottime.encodings and "BYTE_STREAM_SPLIT" not in tottime.encodings


def test_file_statistics_are_the_ones_deltalake_writes(tmp_path):
    """Timestamps truncated to milliseconds, nulls counted, all-null columns without bounds."""
    schema = arrow_schema("pyinstrument_frames")
    rows = []
    for n in range(5):
        keys = dict(zip(INTERVAL_KEY_COLUMNS, _interval(n)))
        keys["start_time"] += dt.timedelta(microseconds=123_456 * n)
        rows.append({**keys, "frame_id": n, "parent_id": None, "depth": 0, "function": f"f{n}", "function_name": "f",
                     "filename": "x.py", "file_path_short": None, "lineno": n, "class_name": None, "time": 1.5 * n,
                     "self_time": 0.25, "await_time": 0.0, "is_application_code": n % 2 == 0, "is_outermost": True,
                     "path_id": -n, "parent_path_id": None})
    table = pa.Table.from_pylist(rows, schema=schema)
    store = Store(str(tmp_path / "store"))
    store.create()
    written = write_data_file("pyinstrument_frames", table, store.table_uri("pyinstrument_frames"), "b",
                              parquet_options(writer_properties()))
    commit_data_files(store.delta("pyinstrument_frames"), [written], "b")
    write_deltalake(str(tmp_path / "reference"), table, writer_properties=writer_properties())

    def stats(table_path: str) -> dict:
        log = sorted(Path(table_path, "_delta_log").glob("*.json"))
        [add] = [json.loads(line)["add"] for f in log for line in f.read_text().splitlines() if '"add"' in line]
        return json.loads(add["stats"])

    assert stats(store.table_uri("pyinstrument_frames")) == stats(str(tmp_path / "reference"))
    assert DeltaTable(store.table_uri("pyinstrument_frames")).to_pyarrow_table().to_pylist() == table.to_pylist()


def test_workers_read_local_files_without_following_links(tmp_path):
    """A file that vanished, or was swapped for a link, after listing is a read failure, as when the
    source itself reads it."""
    real = tmp_path / "real"
    real.write_bytes(b'{"root_frame": null}')
    link = tmp_path / "link"
    link.symlink_to(real)
    tasks = [Task(i, "pyinstrument", b"", path=str(p)) for i, p in enumerate([real, link, tmp_path / "gone"])]
    with ParsePool(1) as pool:
        results = dict(o for chunk in pool.parse(tasks) for o in chunk.outcomes)
    assert isinstance(results[0], ParsedFile) and results[0].summary["is_empty"] is True
    assert results[1].kind == "read" and str(link) in results[1].message
    assert results[2].kind == "read" and "No such file" in results[2].message


def test_each_file_covers_its_own_stretch_of_the_tasks(tmp_path):
    """Two workers, dealt stripes of consecutive chunks: no file's tasks interleave with another's,
    so file statistics keep telling files apart (dealt chunk by chunk, every file would span all)."""
    sink = FactSink({"pyinstrument_frames": str(tmp_path)}, "b", 40 * ROWS_PER_FILE, parquet_options(writer_properties()))
    # 64 input bytes per row, as the pool guesses before it learns: stripes of about 40 files.
    tasks = [Task(i, "pyinstrument", str(i).encode().ljust(64 * ROWS_PER_FILE), _interval(i)) for i in range(400)]
    with ParsePool(2, parse="helpers.crashy_facts:parse") as pool:
        files = [f for r in pool.parse(tasks, sink) for f in r.files]
    contents = [pq.read_table(f.local_path, columns=["start_step", "node_id"]) for f in files]
    spans = sorted((min(ids), max(ids), len(ids)) for ids in (set(t["start_step"].to_pylist()) for t in contents))
    assert sum(n for _, _, n in spans) == 400
    assert all(high < next_low for (_, high, _), (next_low, _, _) in pairwise(spans))
    assert all(high - low + 1 == n for low, high, n in spans)  # each file: a run of consecutive tasks
    # No file holds two nodes: one that did would span from one node's last interval to the next's first.
    assert all(len(set(t["node_id"].to_pylist())) == 1 for t in contents)
    assert len(files) <= 2 * 400 // 40 + 4  # segments of about flush_rows (cut at the 4 nodes), not a file per chunk


# -- partial sums of the phase roll-ups --------------------------------------------------------------
def _segment_parts(paths, fact_table: str, *, careful_at: int | None = None):
    """A worker's parts of one fact table for ``paths``: synthetic intervals over two nodes and modes."""
    from proflake.readers import cprofile as cprofile_reader
    from proflake.readers.parse import parse_stats

    parts = []
    for i, path in enumerate(paths):
        parsed = parse_stats("cprofile", path.read_bytes())
        key_ids = parsed.key_ids.get(fact_table)
        if i == careful_at:  # as the careful path gives it: plain tables, no ids
            careful = cprofile_reader._careful_tables(cprofile_reader._load(path.read_bytes()))
            parsed.facts[fact_table] = careful.functions if fact_table == "function_stats" else careful.callers
            key_ids = None
        interval = []
        for field in arrow_schema("interval_keys"):
            if field.name in ("job_id", "node_id", "start_mode", "end_mode", "job_phase"):
                interval.append(f"{field.name}-{i % 2}")
            elif pa.types.is_string(field.type):
                interval.append(f"{field.name}-{i}")
            elif pa.types.is_timestamp(field.type):
                interval.append(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i))
            elif pa.types.is_integer(field.type):
                interval.append(i)
            else:
                interval.append(float(i))
        parts.append((tuple(interval), parsed.facts[fact_table], key_ids))
    return parts


def _summed_by_key(table: pa.Table) -> dict:
    """Rows summed per key, as the merge into the roll-up adds them (a key may span several rows)."""
    from proflake.schema import PHASE_MEASURES

    measures = [m for m in (*PHASE_MEASURES, "intervals") if m in table.column_names]
    sums: dict = {}
    for row in table.to_pylist():
        key = tuple(v for k, v in row.items() if k not in measures)
        sums[key] = [a + row[m] for a, m in zip(sums.get(key, [0] * len(measures)), measures)]
    return {k: [round(v, 9) if isinstance(v, float) else v for v in values] for k, values in sums.items()}


@pytest.mark.parametrize("fact_table", ["function_stats", "function_callers"])
def test_partial_sums_by_key_ids_equal_the_sums_by_key_text(fact_table):
    from helpers.profiles import LEGACY
    from proflake.schema import PHASE_ROLLUP_OF
    from proflake.workers.segments import _fact_table, _phase_partial

    rollup = PHASE_ROLLUP_OF[fact_table]
    table, key_ids, starts = _fact_table(fact_table, _segment_parts(sorted(LEGACY.rglob("python_stats")), fact_table))
    assert key_ids is not None and all(len(ids) == table.num_rows for ids in key_ids)
    by_ids, by_text = _phase_partial(rollup, table, key_ids, starts), _phase_partial(rollup, table)
    assert by_ids.schema == by_text.schema
    assert sorted(map(str, by_ids.to_pylist())) == sorted(map(str, by_text.to_pylist()))  # the same sums, bit for bit
    assert by_ids.num_rows < table.num_rows  # summed across the files of a node and mode
    for column in table.columns:  # dictionaries of distinct values: Parquet writes those twice as fast
        if pa.types.is_dictionary(column.type):
            values = column.chunk(0).dictionary.to_pylist()
            assert len(values) == len(set(values))


def test_take_ascending_takes_what_chunked_take_takes():
    from proflake.workers.segments import _single_code, _take_ascending

    rng = np.random.default_rng(11)
    for _ in range(50):
        sizes = rng.integers(1, 40, rng.integers(2, 30))
        column = pa.chunked_array([pa.array([f"r{i}" for i in range(start, start + n)])
                                   for start, n in zip(np.cumsum([0, *sizes[:-1]]), sizes)])
        rows = np.sort(rng.choice(len(column), rng.integers(0, len(column)), replace=False))
        expected = column.take(pa.array(rows, pa.int64())).to_pylist()
        starts = np.cumsum([0, *sizes])
        assert _take_ascending(column, rows, starts).to_pylist() == expected
        assert _take_ascending(column, rows).to_pylist() == expected
        # A layout with another number of chunks, or chunks of other lengths where the rows are, is
        # measured again.
        assert _take_ascending(column, rows, np.cumsum([0, len(column)])).to_pylist() == expected
        if len(rows) and len(sizes) > 2:
            wrong = np.cumsum([0, *sizes[:-2], sizes[-2] + 1, sizes[-1] - 1]) if sizes[-1] > 1 else None
            if wrong is not None and rows[-1] >= wrong[-3]:
                assert _take_ascending(column, rows, wrong).to_pylist() == expected
    assert _single_code([np.array([0, 1, 1]), np.array([2**40, 0, 2**40])]).tolist() == [2**40, 2**40 + 1, 2 * 2**40 + 1]
    assert _single_code([np.array([2**31]), np.array([2**31])]) is None  # would pass 2**62


def test_interval_codes_are_equal_exactly_where_the_values_are():
    from proflake.workers.segments import _interval_codes

    rng = np.random.default_rng(7)
    # Five columns of 20,000 distinct values each: the fold would pass 2**62, so the codes come from text.
    dictionaries = [pa.array([f"{c}-{v}" for v in range(20_000)]) for c in range(5)]
    rows = 50_000
    picks = [rng.integers(0, 3, rows) * 7_000 for _ in dictionaries]  # few combinations, many repeats
    columns = [pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array(p, pa.int32()), d)]) for p, d in zip(picks, dictionaries)]
    codes = _interval_codes(columns)
    values = list(zip(*(c.to_pylist() for c in columns)))
    code_of: dict = {}
    for value, code in zip(values, codes.tolist()):
        assert code_of.setdefault(value, code) == code
    assert len(set(code_of.values())) == len(code_of)


def test_partial_sums_stay_right_when_the_known_keys_start_over(monkeypatch):
    from helpers.profiles import LEGACY
    from proflake.readers import cprofile_fast as cprofile_reader
    from proflake.workers.segments import _fact_table, _phase_partial

    monkeypatch.setattr(cprofile_reader, "_KNOWN_KEYS_LIMIT", 300)  # starts over within the segment
    monkeypatch.setattr(cprofile_reader, "_known", cprofile_reader._NO_KEYS)
    parts = _segment_parts(sorted(LEGACY.rglob("python_stats")) * 2, "function_stats")
    table, key_ids, _ = _fact_table("function_stats", parts)
    assert cprofile_reader._known.first_id > 0
    by_ids, by_text = _phase_partial("phase_function_stats", table, key_ids), _phase_partial("phase_function_stats", table)
    assert by_ids.num_rows > by_text.num_rows  # a key under two ids: two rows, which the merge adds up
    assert _summed_by_key(by_ids) == _summed_by_key(by_text)


def test_a_file_without_key_ids_sums_its_segment_by_text():
    from helpers.profiles import LEGACY
    from proflake.workers.segments import _fact_table

    parts = _segment_parts(sorted(LEGACY.rglob("python_stats")), "function_stats", careful_at=1)
    table, key_ids, _ = _fact_table("function_stats", parts)
    assert key_ids is None and table.num_rows == sum(t.num_rows for _, t, _ in parts)


# -- inline workers: the same loop on threads of this process -----------------------------------------
def test_inline_workers_answer_and_write_what_worker_processes_do(tmp_path, monkeypatch):
    """``ParsePool(inline=True)``: no process is started, the parse errors are the same answers, and the
    fact files hold the same rows, each file once, in the same order."""
    from proflake.workers import pool as pool_module
    from proflake.workers import template

    def written(inline: bool, folder: Path) -> tuple[dict, pa.Table]:
        folder.mkdir()
        options = parquet_options(writer_properties())
        sink = FactSink({"pyinstrument_frames": str(folder)}, "b", 7 * ROWS_PER_FILE, options)
        tasks = [Task(i, "pyinstrument", str(i).encode(), _interval(i)) for i in range(30)]
        with ParsePool(2, memory_mb=1024, parse="helpers.crashy_facts:parse", inline=inline) as pool:
            results = list(pool.parse(tasks, sink))
        rows = pa.concat_tables([pq.read_table(f.local_path) for r in results for f in r.files])
        return dict(o for r in results for o in r.outcomes), rows.sort_by([("interval_id", "ascending"), ("frame_id", "ascending")])

    expected_outcomes, expected_rows = written(False, tmp_path / "processes")

    def no_process(*args, **kwargs):
        raise AssertionError("an inline pool started a process")

    monkeypatch.setattr(pool_module.subprocess, "Popen", no_process)
    monkeypatch.setattr(template.Template, "fork", no_process)  # nor asked a template for one
    outcomes, rows = written(True, tmp_path / "inline")
    assert outcomes == expected_outcomes and rows.equals(expected_rows)
    with ParsePool(1, inline=True) as pool:
        chunks = list(pool.parse([Task(0, "cprofile", b"junk"), Task(1, "pyinstrument", b'{"root_frame": null}')]))
    answers = dict(o for chunk in chunks for o in chunk.outcomes)
    assert answers[0].kind == "cprofile" and "not a cProfile stats dump" in answers[0].message
    assert answers[1].summary["is_empty"] is True


def test_an_inline_ingest_stores_what_a_worker_pool_ingest_stores(tmp_path):
    """``--executor inline`` (the kill sweeps' runs: helpers.forked.INLINE) changes who parses, not what
    is stored."""
    from helpers.cli import run_cli
    from test_batches import build_corpus, snapshot

    build_corpus(tmp_path / "src", nodes=2, steps=4, pyinstrument_every=3)
    for executor in ("local", "inline"):
        done = run_cli(["ingest", str(tmp_path / "src"), "--store", str(tmp_path / executor), "--executor", executor,
                        "--workers", "2"], env={**os.environ, "PROFLAKE_FLUSH_ROWS": "900"})
        assert done.returncode == 0, done.stderr
    assert snapshot(str(tmp_path / "inline")) == snapshot(str(tmp_path / "local"))
