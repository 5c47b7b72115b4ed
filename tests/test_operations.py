"""Operating proflake for real: bounded queries (time limit, memory limit, Ctrl-C), BI connection pools,
readers across compaction, what compaction reports, and library errors as one line (docs/operations.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from helpers.profiles import JobBuilder
from proflake import Profiles, ingest
from proflake.errors import ExitCode, QueryLimitError
from proflake.operations import compact
from proflake.store.store import Store

CROSS_JOIN = "SELECT sum(hash(a.x + b.x)) FROM intervals, range(100000000) a(x), range(100000000) b(x)"
STEP = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"


def run_cli(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "proflake.cli", *args], capture_output=True, text=True, check=False, **kwargs
    )


def add_batch(job: JobBuilder, store: Path, step: int) -> None:
    job.cprofile("algo-1", STEP.format(step=step, start=2000 + step * 1000, end=2900 + step * 1000), "ab"[step % 2])
    ingest(str(job.base), str(store))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ops")
    job = JobBuilder(root / "job")
    for step in range(2):
        add_batch(job, root / "store", step)
    return root / "store"


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    return stderr


# -- bounded queries ---------------------------------------------------------------------------------
def test_query_timeout_stops_a_runaway_query_with_one_line(store):
    done = run_cli(["sql", CROSS_JOIN, "--store", str(store), "--timeout", "0.5"])
    assert done.returncode == ExitCode.LIMIT == 6 and done.stdout == ""
    assert one_line(done.stderr).startswith("proflake: error: the query ran past its time limit of 0.5 s")
    assert "--timeout" in done.stderr


def test_ctrl_c_interrupts_a_running_query(store):
    proc = subprocess.Popen(
        [sys.executable, "-m", "proflake.cli", "sql", CROSS_JOIN, "--store", str(store), "--timeout", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Ctrl-C as at a terminal: a run started in the background by a non-interactive shell (`cmd &`)
        # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler in the child.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Wait until the query runs, then press Ctrl-C. Starting (imports, opening the store) costs ~0.5 s of
    # CPU (`proflake sql` of a count, measured); the cross join then burns CPU until stopped: 2 s of CPU
    # means it is running, however busy the machine is.
    deadline = time.monotonic() + 300
    while cpu_seconds(proc.pid) < 2.0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED == 130 and out == ""
    assert one_line(err) == "proflake: interrupted (Ctrl-C)\n"


def test_api_timeout_raises_and_the_connection_still_answers(store):
    profiles = Profiles(str(store), timeout=0.3)
    with pytest.raises(QueryLimitError, match="time limit of 0.3 s"):
        profiles.sql(CROSS_JOIN)
    assert profiles.sql("SELECT count(*) AS n FROM intervals").to_pylist() == [{"n": 2}]
    assert profiles.by_step(0).table.num_rows > 0
    profiles.close()


def test_out_of_memory_names_the_option_that_works(store):
    done = run_cli(["sql", "SELECT list(x) FROM range(50000000) t(x)", "--store", str(store), "--memory-limit", "64MB"])
    assert done.returncode == ExitCode.LIMIT and done.stdout == ""
    assert "raise it with --memory-limit" in one_line(done.stderr) and "SET" not in done.stderr
    done = run_cli(["fetch", "by-step", "0", "--store", str(store), "--memory-limit", "lots"])
    assert done.returncode == ExitCode.USAGE and "is not a size" in one_line(done.stderr)


# One row, one 800 MB list made inside one function call: DuckDB's memory limit does not count it, and
# its interrupt() waits for the call to return (the red team: 5.6 GB under --memory-limit 100MB, Ctrl-C
# ignored). proflake.query.bounded watches the process's memory and abandons what DuckDB will not stop.
ONE_HUGE_LIST = "SELECT range(100000000) AS l"


def _peak_rss_until_exit(proc: subprocess.Popen, timeout: float = 300) -> int:
    """The most resident memory seen of ``proc`` (polled) until it exits."""
    peak, deadline = 0, time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            peak = max(peak, int(Path(f"/proc/{proc.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.05)
    return peak


def test_a_memory_limit_holds_for_a_value_duckdb_does_not_count(store):
    proc = subprocess.Popen([sys.executable, "-m", "proflake.cli", "sql", ONE_HUGE_LIST, "--store", str(store),
                             "--memory-limit", "100MB"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = _peak_rss_until_exit(proc)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.LIMIT and out == ""
    assert one_line(err).startswith("proflake: error: the query needed more memory than its limit of 100MB")
    assert peak < 2 * 2**30, f"peak {peak / 2**30:.1f} GiB under a 100MB limit"


def test_ctrl_c_stops_a_query_inside_one_long_duckdb_call(store):
    proc = subprocess.Popen(
        [sys.executable, "-m", "proflake.cli", "sql", ONE_HUGE_LIST, "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as at a terminal
    )
    deadline = time.monotonic() + 300  # until the list is being built: 400 MB resident
    while proc.poll() is None and time.monotonic() < deadline:
        if int(Path(f"/proc/{proc.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") > 400 * 2**20:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    peak = _peak_rss_until_exit(proc)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED and out == ""
    assert one_line(err) == "proflake: interrupted (Ctrl-C)\n"
    assert peak < 3 * 2**30, f"it kept building the list after Ctrl-C: peak {peak / 2**30:.1f} GiB"


def test_fetch_takes_the_limits_too(store):
    done = run_cli(["fetch", "by-step", "0", "--store", str(store), "--timeout", "60", "--memory-limit", "1GB", "--format", "json"])
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) > 0


# -- BI connection pools -----------------------------------------------------------------------------
def test_pooled_sqlalchemy_connections_are_each_locked_down(store, tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("duckdb_engine")
    from proflake.bi.catalog import build_catalog, init_sql_path
    from proflake.bi.pool import on_connect

    catalog = tmp_path / "bi.duckdb"
    build_catalog(Store(str(store)), catalog, materialize=False, register=False)
    # What the old recipe did (run the .init.sql on each new connection) fails on the second one.
    naive = sqlalchemy.create_engine(f"duckdb:///{catalog}?access_mode=read_only", pool_size=4)
    text = init_sql_path(catalog).read_text()
    sqlalchemy.event.listen(naive, "connect", lambda con, _record: con.execute(text))
    first = naive.connect()
    with pytest.raises(sqlalchemy.exc.DBAPIError, match="locked"):
        naive.connect()
    first.close()
    naive.dispose()

    engine = sqlalchemy.create_engine(f"duckdb:///{catalog}?access_mode=read_only", pool_size=4, max_overflow=0)
    sqlalchemy.event.listen(engine, "connect", on_connect(catalog))
    results: list[object] = []
    barrier = threading.Barrier(4)

    def client() -> None:
        try:
            with engine.connect() as con:
                barrier.wait(timeout=30)  # all four connections checked out of the pool at once
                n = con.execute(sqlalchemy.text("SELECT count(*) FROM step_wall_time")).scalar()
                try:
                    con.execute(sqlalchemy.text("SELECT * FROM read_csv('/etc/passwd')"))
                    results.append("escaped the lock-down")
                except sqlalchemy.exc.DBAPIError:
                    results.append(n)
        except Exception as e:  # noqa: BLE001
            results.append(e)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.dispose()
    assert len(results) == 4 and all(isinstance(r, int) and r > 0 for r in results), results


# -- readers across compaction -----------------------------------------------------------------------
def test_readers_refresh_once_after_vacuum_removed_their_files(tmp_path):
    job = JobBuilder(tmp_path / "job")
    for step in range(3):
        add_batch(job, tmp_path / "store", step)
    profiles = Profiles(str(tmp_path / "store"))
    before = profiles.by_step(0, 2).table.to_pylist()
    total = profiles.sql("SELECT count(*) AS n FROM function_stats").to_pylist()
    report = compact(Store(str(tmp_path / "store")), retention_hours=0)
    assert report.tables["function_stats"]["files_vacuumed"] > 0
    # The open reader's file lists name files vacuum deleted: it refreshes once and answers the same.
    assert profiles.sql("SELECT count(*) AS n FROM function_stats").to_pylist() == total
    after = profiles.by_step(0, 2).table.to_pylist()
    assert [(r["function"], r["total_calls"]) for r in after] == [(r["function"], r["total_calls"]) for r in before]


def test_a_plain_parquet_glob_counts_compacted_rows_twice_until_vacuum_and_the_live_file_list_does_not(tmp_path):
    """What docs/operations.md ("Plain-Parquet readers") tells a reader that does not read the Delta log:
    a glob over a table folder after `compact` sees the replaced files and the compacted one (every row
    twice) for the retention period; the files the log lists (``Store.delta(name).file_uris()``) and every
    proflake reader count each row once."""
    job = JobBuilder(tmp_path / "job")
    for step in range(3):
        add_batch(job, tmp_path / "store", step)
    store = Store(str(tmp_path / "store"))
    folder = tmp_path / "store" / "function_stats"

    def glob_count() -> int:
        return duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder}/*.parquet')").fetchall()[0][0]

    def live_count() -> int:
        files = store.delta("function_stats").file_uris()
        return duckdb.sql("SELECT count(*) FROM read_parquet($files)", params={"files": files}).fetchall()[0][0]

    rows = Profiles(store.location).sql("SELECT count(*) AS n FROM function_stats").to_pylist()[0]["n"]
    assert glob_count() == live_count() == rows
    compact(store)  # the default retention: the replaced files stay for a week
    assert glob_count() == 2 * rows
    assert live_count() == rows == Profiles(store.location).sql("SELECT count(*) AS n FROM function_stats").to_pylist()[0]["n"]
    compact(store, retention_hours=0)
    assert glob_count() == live_count() == rows


def test_compaction_reports_only_what_this_run_did(tmp_path):
    job = JobBuilder(tmp_path / "job")
    for step in range(2):
        add_batch(job, tmp_path / "store", step)
    args = ["compact", "--store", str(tmp_path / "store"), "--retention-hours", "0", "--json"]
    first = run_cli(args)
    assert first.returncode == 0, first.stderr
    assert sum(t["files_vacuumed"] for t in json.loads(first.stdout)["tables"].values()) > 0
    second = run_cli(args)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert data["retention_hours"] == 0
    assert all(t == {"files_removed": 0, "files_added": 0, "files_vacuumed": 0} for t in data["tables"].values())
    assert second.stderr.startswith("nothing to compact; no file unreferenced for over 0 h to vacuum; in ")


# -- library errors at the edges ---------------------------------------------------------------------
def test_a_damaged_table_is_one_line_for_every_reading_command(tmp_path):
    job = JobBuilder(tmp_path / "job")
    add_batch(job, tmp_path / "store", 0)
    log = sorted((tmp_path / "store" / "function_stats" / "_delta_log").glob("*.json"))[-1]
    log.write_text("{ this is not a Delta log")
    job.cprofile("algo-1", STEP.format(step=1, start=3000, end=3900))  # something new, for ingest to write
    # jobs reads only intervals (tables open when a query names them): it answers, and the damage waits
    # for a command that reads function_stats.
    assert run_cli(["jobs", "--store", str(tmp_path / "store")]).returncode == 0
    for args in (["sql", "SELECT count(*) FROM function_stats"], ["fetch", "by-step", "0"], ["compact"],
                 ["ingest", str(job.base)]):
        done = run_cli([*args, "--store", str(tmp_path / "store")])
        assert done.returncode == ExitCode.FAILURE, (args, done.stderr)
        # ingest may have logged progress first ("writing: committing"); the error is its one last line
        last = done.stderr.splitlines()[-1]
        assert "Traceback" not in done.stderr and done.stdout == "", (args, done.stderr)
        assert last.startswith("proflake: error: table 'function_stats' of the store at "), (args, last)
        assert "not valid JSON" in last and "proflake check" in last, (args, last)


def test_a_duckdb_error_is_one_line(store):
    done = run_cli(["sql", "SELECT no_such_column FROM intervals", "--store", str(store)])
    assert done.returncode == ExitCode.FAILURE and done.stdout == ""
    assert "no_such_column" in one_line(done.stderr)


# -- credentials that expire ---------------------------------------------------------------------------
def test_storage_options_carry_refreshed_temporary_credentials(monkeypatch):
    """botocore refreshes temporary credentials near their expiry; every Delta operation asks for the
    store's options again, so it gets the current token, not the one the run started with."""
    import datetime as dt

    from botocore.credentials import RefreshableCredentials
    from proflake.sources.settings import S3Config

    issued = []

    def refresh() -> dict:
        issued.append(len(issued))
        # Already inside botocore's refresh window: each use refreshes, as a token near its end would.
        expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)
        return {"access_key": f"ASIA{len(issued)}", "secret_key": "s", "token": f"token-{len(issued)}",
                "expiry_time": expiry.isoformat()}

    config = S3Config(endpoint_url="http://127.0.0.1:9")
    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "sts-assume-role")
    monkeypatch.setattr(config.session, "get_credentials", lambda: credentials)
    store = Store("s3://bucket/store", s3=config)
    first = store.storage_options["AWS_SESSION_TOKEN"]
    second = store.storage_options["AWS_SESSION_TOKEN"]
    assert first != second and second == f"token-{len(issued)}"
