"""The terminal experience: tables fitted to a terminal, the full contract elsewhere, times people type.

A fake terminal (``stdout_is_terminal`` patched, ``COLUMNS`` set) drives the CLI in-process; one test
runs the real console script under a pseudo-terminal.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
import subprocess
import sys

import pyarrow as pa
import pytest
from click.testing import CliRunner
from helpers.profiles import LEGACY
from proflake import Profiles
from proflake.cli import cli, common
from proflake.errors import ExitCode, UsageError
from proflake.render.columns import limit_rows
from proflake.render.output import render
from proflake.render.terminal import draw, seconds, shorten_middle
from proflake.times import epoch_seconds

STEP_2 = 293  # functions in step 2 of the legacy TensorFlow job
PRE_STEP_ZERO = 2722


@pytest.fixture(scope="module")
def legacy_store(tmp_path_factory) -> str:
    store = tmp_path_factory.mktemp("terminal") / "store"
    result = CliRunner().invoke(cli, ["ingest", str(LEGACY), "--store", str(store)])
    assert result.exit_code == 0, result.stderr
    return str(store)


def split_table(text: str) -> tuple[str, list[str]]:
    """A drawn table's header (its lines joined) and its body lines: the rule of ─ separates them."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    return " ".join(lines[:rule]), lines[rule + 1 :]


@pytest.fixture
def terminal(monkeypatch):
    """Run the CLI as if stdout were a terminal ``width`` characters wide."""

    def run(args: list[str], width: int):
        monkeypatch.setattr(common, "stdout_is_terminal", lambda: True)
        monkeypatch.setenv("COLUMNS", str(width))
        monkeypatch.setenv("NO_COLOR", "1")
        return CliRunner().invoke(cli, args)

    return run


# -- a terminal ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 200])
def test_fetch_on_a_terminal_fits_its_width_and_shows_the_essentials(terminal, legacy_store, width):
    result = terminal(["fetch", "pre-step-zero", "--store", legacy_store], width)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    header, body = split_table(result.stdout)
    for column in ("function", "tottime", "cumtime"):
        assert column in header
    for repeated in ("filename", "lineno", "function_name"):  # function already says them
        assert repeated not in header
    assert len(body) == 20  # the terminal's default top
    assert body[0].startswith("tf_keras_fit_eager.py:46(main)") and body[0].endswith("1")
    assert "9.73 s" in body[0] and "99.0 µs" in body[0]  # units, three significant digits
    assert f"{PRE_STEP_ZERO - 20:,} more row(s) not shown" in result.stderr and "--top N" in result.stderr
    if width == 80:  # long names shortened in the middle: the start of the path and its end kept
        assert any(re.match(r"/usr/….*/base_layer\.py:763\(__call__\)", line) for line in body)
    else:
        assert "/usr/local/lib/python3.7/site-packages/tensorflow/python/keras/engine/base_layer.py:763(__call__)" in result.stdout


def test_an_explicit_top_is_shown_in_full_and_columns_are_chosen(terminal, legacy_store):
    result = terminal(["fetch", "by-step", "2", "--store", legacy_store, "--top", "30", "--columns", "cumtime,function_name"], 200)
    assert result.exit_code == 0, result.stderr
    header, body = split_table(result.stdout)
    assert header.split() == ["cumtime", "function_name"] and len(body) == 30
    assert "not shown" not in result.stderr


def test_grouped_fetch_keeps_the_top_rows_of_every_group(terminal, legacy_store):
    result = terminal(["fetch", "by-job-phase", "--store", legacy_store], 120)
    phases = [line.split()[0] for line in split_table(result.stdout)[1]]
    assert phases == ["initialization"] * 20 + ["training_loop"] * 20
    assert "per group" in result.stderr


def test_listing_on_a_terminal_says_what_every_row_shares_and_what_did_not_fit(terminal, legacy_store):
    result = terminal(["list", "--store", legacy_store], 80)
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "every row: job_id smdebug-tf-legacy, profiler cprofile" in result.stderr
    assert "left out to fit 80 characters" in result.stderr
    assert "9.73 s" in result.stdout and "1.59659e+15" not in result.stdout
    wide = terminal(["list", "--store", legacy_store], 200)
    assert "2020-08-04T23:56:03.775+00:00" in wide.stdout and "left out" not in wide.stderr


@pytest.mark.parametrize("width", [60, 120])
def test_errors_on_a_terminal_always_show_the_whole_reason(terminal, tmp_path, width):
    """Each quarantined file is a block (kind, attempts, last failure; the file; the reason wrapped to the
    width): at any width the reason is neither cut nor left out, and no line is wider than the terminal."""
    deep = tmp_path / "jobs" / "job" / "framework" / "pytorch" / "cprofile" / "algo-1" / ("x" * 40) / (
        "train-0-stepstart-1000_train-0-stepend-2000")
    deep.mkdir(parents=True)
    (deep / "python_stats").write_bytes(b"\x00not marshal")
    store = tmp_path / "store"
    CliRunner().invoke(cli, ["ingest", str(tmp_path / "jobs"), "--store", str(store)])
    (reason,) = Profiles(str(store)).errors()["message"].to_pylist()
    result = terminal(["errors", "--store", str(store)], width)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cprofile  1 attempt  last ") and all(len(line) <= width for line in lines)
    shown = " ".join(line.strip() for line in lines[2:])
    assert reason.split(": ", 1)[1].replace(" ", "") in shown.replace(" ", "")  # the reason, whole
    assert "left out" not in result.stderr


def test_unknown_column_lists_the_valid_ones(terminal, legacy_store):
    result = terminal(["jobs", "--store", legacy_store, "--columns", "job_id,nodez"], 80)
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert result.stderr.startswith("proflake: error: unknown column 'nodez'; expected one of: job_id, framework")


def test_binary_format_refuses_a_terminal(terminal, legacy_store, tmp_path):
    result = terminal(["jobs", "--store", legacy_store, "--format", "parquet"], 80)
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert "--format parquet writes binary data" in result.stderr and "--output FILE" in result.stderr
    out = tmp_path / "jobs.parquet"
    result = terminal(["jobs", "--store", legacy_store, "--format", "parquet", "-o", str(out)], 80)
    assert result.exit_code == 0 and out.stat().st_size > 0


def test_a_real_pseudo_terminal(legacy_store):
    """The console script itself, its stdout a pty 80 columns wide: the table fits."""
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "fetch", "by-step", "2", "--store", legacy_store],
        stdout=follower, stderr=subprocess.PIPE, env=env, timeout=120, check=False,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in text.splitlines()) <= 80 and "cumtime" in text
    assert b"more row(s) not shown" in done.stderr


# -- not a terminal: the contract ----------------------------------------------------------------------
def test_a_pipe_gets_every_row_and_column_in_full(legacy_store):
    runner = CliRunner()
    table = runner.invoke(cli, ["fetch", "pre-step-zero", "--store", legacy_store])
    lines = table.stdout.splitlines()
    assert len(lines) == 2 + PRE_STEP_ZERO and table.stderr == ""
    assert lines[0].split() == ["function", "filename", "lineno", "function_name", "primitive_calls", "total_calls",
                                "tottime", "cumtime", "intervals"]
    rows = list(csv.DictReader(io.StringIO(runner.invoke(cli, ["fetch", "pre-step-zero", "--store", legacy_store,
                                                               "--format", "csv"]).stdout)))
    assert len(rows) == PRE_STEP_ZERO
    # Full precision, no float noise: the shortest text of each value, at most 9 decimals.
    assert all(len(r["tottime"].split(".")[-1]) <= 9 for r in rows)
    listed = json.loads(runner.invoke(cli, ["list", "--store", legacy_store, "--format", "json"]).stdout)
    assert listed[0]["start_time"] == "2020-08-04T23:56:03.775342+00:00"
    assert listed[0]["start_time_us"] == 1596585363775342.0
    again = runner.invoke(cli, ["fetch", "pre-step-zero", "--store", legacy_store])
    assert again.stdout == table.stdout  # stable


def test_text_formats_round_float_noise_but_parquet_keeps_values():
    table = pa.table({"tottime": [0.039528758000000004, 0.1 + 0.2, None], "n": [1, 2, 3]})
    assert render(table, "csv").decode().splitlines()[1:] == ["0.039528758,1", "0.3,2", ",3"]
    assert [r["tottime"] for r in json.loads(render(table, "json"))] == [0.039528758, 0.3, None]
    assert "0.039528758 " in render(table, "table").decode()
    import pyarrow.parquet as pq

    assert pq.read_table(io.BytesIO(render(table, "parquet")))["tottime"][0].as_py() == 0.039528758000000004


# -- the pieces ----------------------------------------------------------------------------------------
def test_seconds_read_with_units():
    assert [seconds(v) for v in (0, 9.72839, 1.036756, 0.00155, 0.000099, 3.7e-8, 123.4, 4567.8, None)] == [
        "0", "9.73 s", "1.04 s", "1.55 ms", "99.0 µs", "37.0 ns", "123 s", "4,568 s", "",
    ]


def test_shorten_middle_keeps_the_end_and_the_first_folder():
    path = "/usr/local/lib/python3.7/site-packages/tensorflow/python/keras/engine/base_layer.py:763(__call__)"
    for width in (24, 40, 60):
        short = shorten_middle(path, width)
        assert len(short) <= width and "…" in short and short.endswith("(__call__)")
    assert shorten_middle(path, 50).startswith("/usr/…/")
    assert shorten_middle("short", 10) == "short"


def test_draw_drops_columns_from_the_right_only_when_shortening_is_not_enough():
    table = pa.table({"a": ["x" * 60], "b": [1], "c": ["y" * 30]})
    drawn = draw(table, 80)
    assert drawn.dropped == [] and max(map(len, drawn.text.splitlines())) <= 80
    drawn = draw(pa.table({f"column_{i}": [i * 1000] for i in range(20)}), 80)
    assert drawn.dropped and drawn.dropped[-1] == "column_19"
    assert max(map(len, drawn.text.splitlines())) <= 80


def test_limit_rows_per_group():
    table = pa.table({"g": ["a"] * 5 + ["b"] * 2, "v": range(7)})
    kept, omitted = limit_rows(table, 3, ["g"])
    assert kept["v"].to_pylist() == [0, 1, 2, 5, 6] and omitted == 2
    kept, omitted = limit_rows(table, 3)
    assert kept.num_rows == 3 and omitted == 4


# -- times ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        1596585375.5,
        "1596585375.5",
        "2020-08-04T23:56:15.5Z",
        "2020-08-04 23:56:15.5",
        "2020-08-04T23:56:15.500+00:00",
        "2020-08-05T01:56:15.5+02:00",
        dt.datetime(2020, 8, 4, 23, 56, 15, 500000, tzinfo=dt.timezone.utc),
        dt.datetime(2020, 8, 4, 23, 56, 15, 500000),  # naive: UTC, as the tables show
    ],
)
def test_times_parse_from_numbers_iso_text_and_datetimes(value):
    assert epoch_seconds(value) == 1596585375.5


def test_a_date_is_its_midnight_utc_and_nonsense_is_refused():
    assert epoch_seconds("2020-08-04") == epoch_seconds(dt.date(2020, 8, 4)) == 1596499200.0
    with pytest.raises(UsageError, match="is not a time; give seconds since the epoch"):
        epoch_seconds("yesterday")


def test_by_time_takes_iso_text_in_the_cli_and_the_api(legacy_store):
    from proflake import Profiles

    runner = CliRunner()
    by_iso = runner.invoke(cli, ["fetch", "by-time", "2020-08-04 23:56:15", "2020-08-04T23:56:15.5Z",
                                 "--store", legacy_store, "--format", "json"])
    by_epoch = runner.invoke(cli, ["fetch", "by-time", "1596585375", "1596585375.5", "--store", legacy_store,
                                   "--format", "json"])
    assert by_iso.exit_code == 0, by_iso.stderr
    assert json.loads(by_iso.stdout) == json.loads(by_epoch.stdout) and len(json.loads(by_iso.stdout)) == STEP_2
    profiles = Profiles(legacy_store)
    window = (dt.datetime(2020, 8, 4, 23, 56, 15, tzinfo=dt.timezone.utc), "2020-08-04T23:56:15.5+00:00")
    assert profiles.by_time(*window).table.num_rows == STEP_2
    bad = runner.invoke(cli, ["fetch", "by-time", "noon", "1", "--store", legacy_store])
    assert bad.exit_code == ExitCode.USAGE and "'noon' is not a time" in bad.stderr


def test_an_empty_answer_names_what_exists(legacy_store):
    result = CliRunner().invoke(cli, ["fetch", "by-step", "7", "--store", legacy_store])
    assert result.exit_code == 0
    assert "no cprofile intervals matched by-step" in result.stderr
    assert "prestepzero, train steps 0, 2-3; node(s) 151-algo-1" in result.stderr
    assert "2020-08-04T23:56:03+00:00 to 2020-08-04T23:56:16+00:00" in result.stderr


# -- start-up ------------------------------------------------------------------------------------------
_LOADED = """
import sys
from proflake.cli import cli, common
common.stdout_is_terminal = lambda: {terminal}
try:
    cli({args!r}, prog_name="proflake")
except SystemExit:
    pass
print(sorted(m for m in ("pyarrow", "pyarrow.compute", "duckdb", "deltalake", "rich", "pandas", "boto3") if m in sys.modules),
      file=sys.stderr)
"""


def _loaded(args: list[str], terminal: bool = False) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _LOADED.format(args=args, terminal=terminal)],
                          capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "100"})
    return json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_help_imports_nothing_heavy():
    assert _loaded(["--help"]) == []


def test_answers_never_import_pandas(legacy_store):
    for args, terminal in (
        (["fetch", "by-step", "2", "--format", "json"], False),
        (["list"], False),
        (["list"], True),
    ):
        loaded = _loaded([*args, "--store", legacy_store], terminal)
        assert "pandas" not in loaded and "pyarrow" in loaded, args
        assert ("rich" in loaded) == terminal, args


def test_reading_a_small_local_store_never_imports_deltalake(legacy_store):
    """A small local table's log is read from its JSON commits (store/snapshot.py): deltalake, ~0.1 s of
    CPU to import, is for writing and for large or remote logs. Nor pyarrow.compute (~30 ms: the
    functions are called through proflake.arrowfn)."""
    for args in (["jobs"], ["fetch", "by-step", "2"], ["list"], ["nodes"]):
        loaded = _loaded([*args, "--store", legacy_store])
        assert "deltalake" not in loaded and "duckdb" in loaded, args
        assert "pyarrow.compute" not in loaded and "pandas" not in loaded, args


def test_an_ingest_never_imports_pyarrow_compute(tmp_path):
    """Its sorts, casts and takes go through proflake.arrowfn: pyarrow.compute's import, ~30 ms of CPU,
    was paid by every ingest process, a nightly batch of a few files included."""
    loaded = _loaded(["ingest", str(LEGACY), "--store", str(tmp_path / "store")])
    assert "deltalake" in loaded and "pyarrow.compute" not in loaded


# -- hints ---------------------------------------------------------------------------------------------
def test_a_missing_store_hint_never_proposes_a_store_inside_a_source(tmp_path, monkeypatch):
    job = tmp_path / "job"
    (job / "framework" / "pytorch").mkdir(parents=True)
    runner = CliRunner()
    for store in (job, job / "framework" / "pytorch"):
        result = runner.invoke(cli, ["jobs", "--store", str(store)])
        assert result.exit_code == ExitCode.FAILURE
        assert f"the smdebug job folder '{job}', a source to ingest, not a store" in result.stderr
        assert f"proflake ingest {job} --store ./proflake-store" in result.stderr
    monkeypatch.chdir(job)  # the default store would land inside the job folder: propose a sibling
    monkeypatch.delenv("PROFLAKE_STORE", raising=False)
    result = runner.invoke(cli, ["jobs"])
    assert f"proflake ingest {job} --store {tmp_path / 'job-proflake-store'}" in result.stderr
    result = runner.invoke(cli, ["jobs", "--store", str(tmp_path / "elsewhere")])
    assert result.stderr.endswith(f"run 'proflake ingest SOURCE --store {tmp_path / 'elsewhere'}' first\n")


# -- the ingest's progress -----------------------------------------------------------------------------
def test_progress_bar_prints_messages_above_itself_and_goes_away():
    from proflake.cli.progress import BarProgress, LogProgress
    from rich.console import Console

    buffer = io.StringIO()
    bar = BarProgress(Console(file=buffer, force_terminal=True, width=100, no_color=True))
    bar.listing(3)
    bar.reading(3, 3_000_000)
    bar.advance(2, 2_000_000)
    bar.log("added this run's sums to the phase roll-ups of 1 job(s)")
    bar.writing("committing")
    bar.done()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "\nadded this run's sums to the phase roll-ups of 1 job(s)\n" in "\n" + text.replace("\r", "\n")
    assert "committingadded" not in text
    log = LogProgress()
    lines: list[str] = []
    log.log = lines.append
    log.writing("committing")
    assert lines == ["writing: committing"]


def test_an_unquoted_star_expanded_by_the_shell_is_named(legacy_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("notes.txt", "run.py"):
        (tmp_path / name).write_text("")
    runner = CliRunner()
    result = runner.invoke(cli, ["fetch", "by-step", "2", "notes.txt", "run.py", "--store", legacy_store])
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert "END_STEP is notes.txt, run.py: your shell expanded an unquoted * into file names; quote it: '*'" in result.stderr
    one = runner.invoke(cli, ["fetch", "by-step", "2", "notes.txt", "--store", legacy_store])
    assert one.exit_code == ExitCode.USAGE and "quote it: '*'" in one.stderr
    quoted = runner.invoke(cli, ["fetch", "by-step", "2", "*", "--store", legacy_store, "--format", "csv"])
    assert quoted.exit_code == 0 and len(quoted.stdout.splitlines()) > 1


# -- hints that fit, and a listing that keeps its time column ----------------------------------------------
@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_hints_under_a_fetch_table_fit_the_terminal(terminal, legacy_store, width):
    result = terminal(["fetch", "pre-step-zero", "--store", legacy_store, "--columns", "function,tottime,cumtime,"
                       "total_calls,primitive_calls,filename,lineno,function_name"], width)
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= width
    assert max(len(line) for line in result.stderr.splitlines()) <= width
    said = " ".join(line.strip() for line in result.stderr.splitlines())
    assert f"… {PRE_STEP_ZERO - 20:,} more row(s) not shown (the first 20); --top N to show more" in said
    assert "left out to fit" in said and "--columns all for every one" in said
    nothing = terminal(["fetch", "by-step", "900", "--store", legacy_store], width)
    assert nothing.stderr.strip() and max(len(line) for line in nothing.stderr.splitlines()) <= width


@pytest.mark.parametrize("width", [80, 100, 140])
def test_a_listing_keeps_its_time_column_at_any_width(terminal, legacy_store, width):
    """Columns go by importance, not from the right: start_time (the only time column), then where and
    which step stay longest; what is left out is named, and what stays keeps the listing's order."""
    from proflake.render.columns import DEFAULT_COLUMNS, PRIORITY

    result = terminal(["list", "--store", legacy_store], width)
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= width
    assert max(len(line) for line in result.stderr.splitlines()) <= width
    order = [c for c in DEFAULT_COLUMNS["list"] if c not in ("job_id", "profiler")]  # said once: every row
    said = " ".join(line.strip() for line in result.stderr.splitlines())
    found = re.search(r"left out to fit \d+ characters: ([a-z_, ]+);", said)
    left_out = found.group(1).split(", ") if found else []
    shown = [c for c in order if c not in left_out]
    assert "start_time" in shown and "node_id" in shown and "start_step" in shown
    header, body = split_table(result.stdout)
    assert "time" in header and all(re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", line) for line in body)
    if left_out:
        assert left_out == [c for c in order if c in left_out]  # named in the listing's order
        # ... the least important, by the stated priority: nothing kept is less important than what went
        rank = {c: i for i, c in enumerate(PRIORITY["list"])}
        assert max(rank[c] for c in shown) < min(rank[c] for c in left_out)
    else:
        assert "left out" not in said
    if width == 80:
        assert left_out  # the 80-column terminal cannot hold the whole listing: the time column still stays
