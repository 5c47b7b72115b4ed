"""The render layer draws plain data: given what the query layer read (proflake.query.page_data), the report,
the diff page, the trend page and the exports are made with every way to the store shut, and they are the
pages the results' own methods make. (The import rule beside it is in tests/test_architecture.py.)"""

from __future__ import annotations

import json
import math

import duckdb
import pytest
from proflake import Profiles, ingest
from proflake import sql as queries
from proflake.capture.sample_job import generate_sample_job
from proflake.pages import export
from proflake.query import page_data
from proflake.query.engine import Engine
from proflake.query.profiles import Profiles as EngineProfiles
from proflake.render.exports import renderer
from proflake.render.report import data as report
from proflake.render.report import diff as diff_page
from proflake.render.report import trend as trend_page
from test_trend import SERIES
from test_trend_series import store_of

JOB = "plain-job"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("plain")
    generate_sample_job(base / JOB, nodes=2, train_steps=4, eval_steps=2)
    ingest(str(base / JOB), str(base / "store"))
    return str(base / "store")


def shut_the_store(monkeypatch) -> None:
    """Every way a renderer could read the store raises: DuckDB's connect, proflake.sql, the engine."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the render layer ran a query")

    monkeypatch.setattr(duckdb, "connect", refuse)
    for name in ("run", "run_named", "connect"):
        monkeypatch.setattr(queries, name, refuse)
    for name in ("_run", "_rollup", "_rollup_aside", "connection", "_connection"):
        monkeypatch.setattr(Engine, name, refuse)
    for name in ("fetch", "diff", "trend"):
        monkeypatch.setattr(EngineProfiles, name, refuse)


def same_page(a: dict, b: dict) -> None:
    """Equal pages, but for when they were made and the last bits of a float (DuckDB's parallel sums run
    in any order, so two runs of one roll-up can differ there)."""
    a, b = json.loads(json.dumps(a, default=str)), json.loads(json.dumps(b, default=str))
    a["meta"].pop("generated_at")
    b["meta"].pop("generated_at")
    assert_close(a, b, "page")


def assert_close(a, b, where: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), where
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_the_report_and_the_exports_are_drawn_from_precomputed_data_alone(store, profiler, monkeypatch):
    result = Profiles(store).by_job_phase(profiler=profiler)
    expected = result.report().data
    exported = {fmt: export(result, fmt) for fmt in ("speedscope", "collapsed")}
    inputs = page_data.report_inputs(result)
    stacks = page_data.export_inputs(result)
    shut_the_store(monkeypatch)
    with pytest.raises(AssertionError, match="ran a query"):  # the store is shut: reading it fails
        result.report()
    same_page(report.report_data(inputs), expected)
    speedscope = json.loads(renderer("speedscope").render(stacks))
    assert_close(speedscope, json.loads(exported["speedscope"]), "speedscope")
    collapsed = renderer("collapsed").render(stacks).decode().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in collapsed] == [
        line.rsplit(" ", 1)[0] for line in exported["collapsed"].decode().splitlines()
    ]


def test_the_diff_page_is_drawn_from_precomputed_data_alone(store, monkeypatch):
    profiles = Profiles(store)
    result = profiles.diff(
        {"job": JOB, "method": "by_step", "start_step": 0, "end_step": 1},
        {"job": JOB, "method": "by_step", "start_step": 2, "end_step": 3},
    )
    expected = result.report().data
    stacks = page_data.diff_stacks(result)
    shut_the_store(monkeypatch)
    same_page(diff_page.build_diff_report(result, stacks).data, expected)


def test_the_trend_page_is_drawn_from_precomputed_data_alone(tmp_path, monkeypatch):
    store, _ = store_of(tmp_path / "mixed", SERIES["mixed"])
    result = Profiles(str(store)).trend()
    assert result.changes
    expected = result.report().data
    diffs = page_data.trend_diffs(result, trend_page.MAX_DIFFS)
    location = page_data.store_location(result)
    shut_the_store(monkeypatch)
    same_page(trend_page.build_trend_report(result, diffs, store=location).data, expected)
