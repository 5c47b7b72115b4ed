"""Titles that name the selection (proflake.render.titles): the report's title, the speedscope export's name
and the diff page's sides say what was selected (``run-a · node algo-1 · steps 2..5 (train)``), never the
fetch method's grouping (``by-job-phase``), in the CLI as in Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_cli
from proflake.numbers import utc
from proflake.pages import export
from proflake.query.profiles import Profiles
from test_diff import FUNCTIONS, build_store, step_times

T0_US = 1_700_000_000_000_000  # test_diff.write_job's step 0


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    import numpy as np

    rng = np.random.default_rng(1)
    nodes = {n: step_times(rng, FUNCTIONS, 8) for n in ("algo-1", "algo-2")}
    return build_store(tmp_path_factory.mktemp("titles"), {"run-a": nodes})


@pytest.mark.parametrize(("method", "arguments", "title"), [
    ("by_job_phase", {}, "run-a · whole job"),
    ("by_training_phase", {}, "run-a · whole job"),
    ("by_step", {"start_step": 2, "end_step": 5}, "run-a · steps 2..5 (train)"),
    ("by_step", {"start_step": 3}, "run-a · step 3 (train)"),
    ("by_step", {"start_step": "*", "end_step": "*"}, "run-a · steps start..end (train)"),
    ("by_step", {"start_step": 4, "end_step": "*"}, "run-a · steps 4..end (train)"),
    ("by_time", {"start_time_s": T0_US / 1e6, "end_time_s": T0_US / 1e6 + 3.5},
     "run-a · time 2023-11-14T22:13:20Z .. 2023-11-14T22:13:23Z"),
    ("pre_step_zero", {}, "run-a · initialization (before step 0)"),
    ("post_hook_close", {}, "run-a · finalization (after the hook closed)"),
])
def test_the_report_and_the_speedscope_export_are_titled_by_the_selection(store, method, arguments, title):
    result = Profiles(str(store)).fetch(method, job="run-a", **arguments)
    assert result.report().data["meta"]["title"] == title
    document = json.loads(export(result, "speedscope"))
    assert document["name"] == document["profiles"][0]["name"] == f"{title} (cprofile, {result.intervals.num_rows:,} intervals)"


def test_a_node_is_named(store):
    result = Profiles(str(store)).fetch("between_modes", job="run-a", node="algo-2", start_mode="train", end_mode="train")
    assert result.report().data["meta"]["title"] == "run-a · node algo-2 · modes train → train"


def test_report_job_and_export_job_on_the_command_line(store, tmp_path):
    done = run_cli(["report", "job", "--store", str(store), "--node", "algo-1", "-o", str(tmp_path / "r.html")])
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert '"title":' + json.dumps("run-a · node algo-1 · whole job") in page
    done = run_cli(["export", "job", "--store", str(store), "--format", "speedscope", "-o", str(tmp_path / "j.json")])
    assert done.returncode == 0, done.stderr
    name = json.loads((tmp_path / "j.json").read_text())["name"]
    assert name == "run-a · whole job (cprofile, 16 intervals)"
    assert "by-job-phase" not in name


@pytest.mark.parametrize(("moment", "text"), [
    (1596585375.0, "2020-08-04T23:56:15Z"), (None, ""),
])
def test_utc_is_iso_8601_with_a_z(moment, text):
    assert utc(moment) == text


def test_utc_keeps_milliseconds_and_reads_naive_datetimes_as_utc():
    import datetime as dt

    assert utc(1596585375.25, timespec="milliseconds") == "2020-08-04T23:56:15.250Z"
    assert utc(dt.datetime(2020, 8, 4, 23, 56, 15)) == "2020-08-04T23:56:15Z"
    assert utc(dt.datetime(2020, 8, 5, 1, 56, 15, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == "2020-08-04T23:56:15Z"
