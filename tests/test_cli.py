"""The command line: exit codes, stdout (data only) and stderr (messages) asserted separately."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import click
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers.profiles import LEGACY, JobBuilder
from proflake.cli import cli
from proflake.errors import ExitCode


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def legacy_store(runner, store_path) -> str:
    result = runner.invoke(cli, ["ingest", str(LEGACY), "--store", str(store_path)])
    assert result.exit_code == 0, result.stderr
    return str(store_path)


def test_lazy_command_map_is_complete():
    """proflake.cli.COMMANDS names every command's module: each module imported, the registered commands
    are exactly the map's, and each comes from the module the map names."""
    import importlib
    import pkgutil

    import proflake.cli
    from proflake.cli import COMMANDS

    for module in pkgutil.iter_modules(proflake.cli.__path__):
        if module.name != "__main__":  # (it runs the CLI)
            importlib.import_module(f"proflake.cli.{module.name}")
    assert set(cli.commands) == set(COMMANDS)
    for name, command in cli.commands.items():
        assert command.callback.__module__ == f"proflake.cli.{COMMANDS[name]}", name


def test_a_command_imports_only_its_own_module():
    code = (
        "import sys; from proflake.cli import cli; "
        "cli.main(['jobs', '--help'], standalone_mode=False); "
        "print(sorted(m for m in sys.modules if m.startswith('proflake.cli.') and m != 'proflake.cli.common'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['proflake.cli.inspect']"


def test_every_command_has_help(runner):
    def walk(group: click.Group, prefix: list[str]):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            yield prefix + [name], command
            if isinstance(command, click.Group):
                yield from walk(command, prefix + [name])

    for path, command in walk(cli, []):
        assert command.help, f"proflake {' '.join(path)} has no help text"
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_ingest_reports_on_stderr_and_json_on_stdout(runner, store_path):
    result = runner.invoke(cli, ["ingest", str(LEGACY), "--store", str(store_path), "--json"])
    assert result.exit_code == ExitCode.OK
    summary = json.loads(result.stdout)
    assert summary["new_intervals"] == 3 and summary["rows"]["function_stats"] == 3245
    assert "ingested 3 new interval(s)" in result.stderr
    again = runner.invoke(cli, ["ingest", str(LEGACY), "--store", str(store_path)])
    assert again.exit_code == ExitCode.OK and again.stdout == ""
    assert again.stderr.startswith("nothing new: 3 stats file(s) already ingested")


def test_unrecognised_files_are_reported_but_not_fatal(runner, tmp_path, store_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    (tmp_path / "job" / "framework" / "pytorch" / "notes.txt").write_text("hello")
    result = runner.invoke(cli, ["ingest", str(tmp_path / "job"), "--store", str(store_path)])
    assert result.exit_code == ExitCode.OK
    assert "fits no smdebug layout" in result.stderr and "notes.txt" in result.stderr


def test_bad_stats_files_make_a_partial_run(runner, tmp_path, store_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    bad = job.stats_dir("cprofile", "algo-1", "train-1-stepstart-3000_train-1-stepend-4000")
    bad.mkdir(parents=True)
    (bad / "python_stats").write_bytes(b"not marshal")
    result = runner.invoke(cli, ["ingest", str(tmp_path / "job"), "--store", str(store_path)])
    assert result.exit_code == ExitCode.PARTIAL
    assert "failed:" in result.stderr and "not a cProfile stats dump" in result.stderr
    assert "1 new interval(s)" in result.stderr


def test_missing_source_is_one_clear_line(runner, store_path):
    result = runner.invoke(cli, ["ingest", "/no/such/folder", "--store", str(store_path)])
    assert result.exit_code == ExitCode.FAILURE
    assert result.stdout == ""
    assert result.stderr == "proflake: error: source folder '/no/such/folder' does not exist; check the path\n"


def test_query_on_missing_store(runner, tmp_path):
    result = runner.invoke(cli, ["nodes", "--store", str(tmp_path / "nothing")])
    assert result.exit_code == ExitCode.FAILURE and result.stdout == ""
    assert "no proflake store at" in result.stderr and "proflake ingest" in result.stderr
    assert "Traceback" not in result.stderr


def test_nodes_jobs_list_in_every_format(runner, legacy_store):
    result = runner.invoke(cli, ["nodes", "--store", legacy_store, "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == [{"node_id": "151-algo-1"}]
    result = runner.invoke(cli, ["jobs", "--store", legacy_store, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["job_id"] for r in rows] == ["smdebug-tf-legacy"] and rows[0]["intervals"] == "3"
    result = runner.invoke(cli, ["list", "--store", legacy_store])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and lines[0].startswith("interval_id") and len(lines) == 2 + 3


def test_fetch_by_step_formats(runner, legacy_store, tmp_path):
    result = runner.invoke(cli, ["fetch", "by-step", "2", "--store", legacy_store, "--format", "json", "--top", "3"])
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    assert {"function", "filename", "lineno", "function_name", "primitive_calls", "total_calls", "tottime", "cumtime"} <= set(rows[0])
    assert [r["cumtime"] for r in rows] == sorted((r["cumtime"] for r in rows), reverse=True)
    out = tmp_path / "step.parquet"
    result = runner.invoke(cli, ["fetch", "by-step", "2", "--store", legacy_store, "--format", "parquet", "-o", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    assert pq.read_table(out).num_rows == 293


def test_fetch_roll_ups_carry_their_group_columns(runner, legacy_store):
    result = runner.invoke(cli, ["fetch", "by-training-phase", "--store", legacy_store, "--format", "json", "--top", "1"])
    rows = json.loads(result.stdout)
    assert [(r["start_mode"], r["end_mode"]) for r in rows] == [("train", "train"), ("prestepzero", "train")]
    result = runner.invoke(cli, ["fetch", "by-job-phase", "--store", legacy_store, "--format", "json", "--top", "1", "--per-node"])
    rows = json.loads(result.stdout)
    assert [(r["node_id"], r["job_phase"]) for r in rows] == [("151-algo-1", "initialization"), ("151-algo-1", "training_loop")]


def test_fetch_with_bad_mode_lists_valid_names(runner, legacy_store):
    result = runner.invoke(cli, ["fetch", "by-step", "2", "--mode", "trian", "--store", legacy_store])
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert result.stderr == (
        "proflake: error: unknown mode 'trian'; expected one of: train, eval, predict, global, prestepzero, posthookclose\n"
    )


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["fetch", "by-step", "3", "1"], "the step range ends (1) before it starts (3)"),
        (["fetch", "by-time", "1596585400", "1596585300"],
         "the time window ends (1596585300) before it starts (1596585400)"),
        (["export", "by-step", "3", "1", "--format", "collapsed"], "the step range ends (1) before it starts (3)"),
        (["report", "by-step", "9", "2", "--out", "r.html"], "the step range ends (2) before it starts (9)"),
        (["diff", "smdebug-tf-legacy", "--base-steps", "3:1"], "the step range ends (1) before it starts (3)"),
    ],
)
def test_a_reversed_range_is_a_usage_error(runner, legacy_store, command, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli, [*command, "--store", legacy_store])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"proflake: error: {message}; give its ")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--bogus"], "no such option '--bogus'; see 'proflake --help'"),
        (["bogus"], "no such command 'bogus'; see 'proflake --help'"),
        (["fetch", "by-stepp"],
         "no such command 'by-stepp' (did you mean one of: 'by-step', 'by-time'?); see 'proflake fetch --help'"),
        (["fetch"], "missing command; expected one of: between-modes, by-job-phase, by-step, by-time, "
                    "by-training-phase, post-hook-close, pre-step-zero; see 'proflake fetch --help'"),
        (["fetch", "by-step"], "missing argument 'START_STEP'; see 'proflake fetch by-step --help'"),
        (["fetch", "by-step", "1", "--top", "x"],
         "invalid value for '--top': 'x' is not a valid integer range; see 'proflake fetch by-step --help'"),
        (["fetch", "by-step", "1", "--format", "svg"], "invalid value for '--format': 'svg' is not one of 'table', "
                                                      "'csv', 'json', 'parquet'; see 'proflake fetch by-step --help'"),
        (["export", "by-step", "1"], "missing option '--format'; choose from: speedscope, collapsed, prof; "
                                     "see 'proflake export by-step --help'"),
        (["ingest"], "missing argument 'SOURCE'; see 'proflake ingest --help'"),
        (["jobs", "extra"], "got unexpected extra argument (extra); see 'proflake jobs --help'"),
        (["sql"], "missing QUERY: SQL text, a .sql file, or - for stdin (or --schema); see 'proflake sql --help'"),
        (["sql", "SELECT 1", "--param", "x"], "invalid value for --param: 'x' is not NAME=VALUE; see 'proflake sql --help'"),
        (["diff", "--steps", "1:2"], "missing argument 'BASE_JOB'; see 'proflake diff --help'"),
        (["compact", "--retention-hours", "-1"], "invalid value for '--retention-hours': -1 is not in the range "
                                                 "x>=0; see 'proflake compact --help'"),
    ],
)
def test_a_usage_error_is_one_line_pointing_at_help(runner, args, line):
    """docs/operations.md: every failure is one line on stderr. click's own usage errors (unknown option
    or command, missing argument, bad value) were its three or four lines (Usage:, Try ..., Error: ...)."""
    result = runner.invoke(cli, args, prog_name="proflake")
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert result.stderr == f"proflake: error: {line}\n"


def test_proflake_alone_still_shows_its_help(runner):
    result = runner.invoke(cli, [], prog_name="proflake")
    assert "Usage: proflake [OPTIONS] COMMAND [ARGS]..." in result.output and "fetch" in result.output


def test_usage_errors_raise_without_standalone_mode():
    """Code that calls cli.main(..., standalone_mode=False) still gets click's exception to catch."""
    with pytest.raises(click.UsageError, match=r"^no such option '--bogus' \(did you mean '--columns'\?\); see 'proflake jobs --help'$"):
        cli.main(["jobs", "--bogus"], prog_name="proflake", standalone_mode=False)


def test_fetch_nothing_matched_says_so(runner, legacy_store):
    result = runner.invoke(cli, ["fetch", "by-step", "7", "--store", legacy_store])
    assert result.exit_code == 0
    assert "no cprofile intervals matched by-step" in result.stderr


def test_fetch_writes_a_prof_file(runner, legacy_store, tmp_path):
    import pstats

    prof = tmp_path / "out.prof"
    result = runner.invoke(cli, ["fetch", "pre-step-zero", "--store", legacy_store, "--prof", str(prof), "--top", "1"])
    assert result.exit_code == 0
    assert len(pstats.Stats(str(prof)).stats) == 2722


def test_sql_with_bound_params_file_and_stdin(runner, legacy_store, tmp_path):
    query = "SELECT count(*) AS n FROM function_stats WHERE start_step = CAST($step AS BIGINT)"
    result = runner.invoke(cli, ["sql", query, "--param", "step=2", "--store", legacy_store, "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["\"n\"", "293"]
    path = tmp_path / "q.sql"
    path.write_text("SELECT DISTINCT job_phase FROM intervals ORDER BY 1")
    result = runner.invoke(cli, ["sql", str(path), "--store", legacy_store, "--format", "json"])
    assert json.loads(result.stdout) == [{"job_phase": "initialization"}, {"job_phase": "training_loop"}]
    result = runner.invoke(cli, ["sql", "-", "--store", legacy_store, "--format", "csv"], input="SELECT 1 AS one")
    assert result.stdout.splitlines() == ["\"one\"", "1"]


def test_sql_error_is_one_line(runner, legacy_store):
    result = runner.invoke(cli, ["sql", "SELEC nonsense", "--store", legacy_store])
    assert result.exit_code == ExitCode.FAILURE and result.stdout == ""
    assert result.stderr.startswith("proflake: error: Parser Error") and result.stderr.count("\n") == 1


def test_console_script_runs_as_a_real_process(legacy_store):
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "nodes", "--store", legacy_store, "--format", "csv"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["\"node_id\"", "\"151-algo-1\""]


def test_demo_runs_end_to_end(runner, tmp_path):
    out = tmp_path / "sample"
    store = tmp_path / "demo-store"
    for _ in range(2):  # a second run replaces the sample job instead of doubling it
        result = runner.invoke(cli, ["demo", "--store", str(store), "--out", str(out)])
        assert result.exit_code == 0, result.stderr
    assert "Step 1 of training" in result.stdout and "pyinstrument" in result.stdout
    assert "ingested 30 new interval(s)" in result.stderr
    jobs = runner.invoke(cli, ["jobs", "--store", str(store), "--format", "json"])
    assert [(j["job_id"], j["intervals"], j["nodes"]) for j in json.loads(jobs.stdout)] == [("sample", 30, 2)]


def test_library_does_not_import_click_or_pandas():
    code = "import sys, proflake, proflake.query.profiles, proflake.ingestion.batch; print(sorted(m for m in ('click', 'pandas') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_demo_refuses_to_overwrite_a_foreign_folder(runner, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    result = runner.invoke(cli, ["demo", "--store", str(tmp_path / "s"), "--out", str(out)])
    assert result.exit_code == ExitCode.FAILURE
    assert "does not look like a previous demo's output" in result.stderr
    assert (out / "thesis.tex").exists()


def test_ci_runs_the_readme_test_command():
    root = Path(__file__).resolve().parents[1]
    assert "exec bin/test" in (root / ".ci" / "run").read_text()
    readme = (root / "README.md").read_text()
    assert "bin/test" in readme and "bin/demo" in readme


def test_every_query_file_is_documented_and_used():
    from proflake.sql import query_names, query_text

    root = Path(__file__).resolve().parents[1]
    docs = "\n".join(p.read_text(encoding="utf-8") for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))])
    for name in query_names():
        assert query_text(name).startswith(f"-- {name}"), f"queries/{name}.sql must open with its header comment"
        assert f"{name}.sql" in docs, f"queries/{name}.sql is not linked from README.md or docs/"


def test_readme_sql_examples_run_on_a_sample_job(tmp_path):
    """The docs' ad hoc SQL examples must not rot: each runs and returns rows on a real job."""
    import re

    from proflake import Profiles, ingest
    from proflake.capture.sample_job import generate_sample_job

    page = (Path(__file__).resolve().parents[1] / "docs" / "sql-and-bi.md").read_text(encoding="utf-8")
    section = page.split("## Ad hoc SQL", 1)[1].split("\n## ", 1)[0]
    examples = re.findall(r"\n    (-- .*?;)\n", section, flags=re.S)
    assert len(examples) == 4
    generate_sample_job(tmp_path / "job", nodes=2, train_steps=2, eval_steps=1)
    ingest(str(tmp_path / "job"), str(tmp_path / "store"))
    profiles = Profiles(str(tmp_path / "store"))
    for example in examples:
        sql = "\n".join(line[4:] if line.startswith("    ") else line for line in example.splitlines())
        assert profiles.sql(sql.rstrip(";")).num_rows > 0, sql
