"""proflake export: speedscope files validate against speedscope's own published schema (from its npm
package, pinned in tests/speedscope/), collapsed stacks add up to the selection's totals, .prof files load
in pstats."""

from __future__ import annotations

import json
import math
import pstats
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from proflake import Profiles, ingest
from proflake.capture.sample_job import generate_sample_job
from proflake.cli import cli
from proflake.errors import ExitCode
from proflake.render.exports import CollapsedRenderer, PstatsRenderer, SpeedscopeRenderer

SPEEDSCOPE = Path(__file__).parent / "speedscope"


def speedscope_package() -> Path:
    """speedscope's npm package, installed by bin/setup-test from tests/speedscope/package-lock.json."""
    package = SPEEDSCOPE / "node_modules" / "speedscope"
    if not (package / "package.json").exists():
        pytest.fail("speedscope's npm package is missing: run bin/setup-test (bin/test does) and re-run", pytrace=False)
    return package


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("exports")
    generate_sample_job(base / "export-job", nodes=2, train_steps=3, eval_steps=1)
    ingest(str(base / "export-job"), str(base / "store"))
    return str(base / "store")


@pytest.fixture(scope="module")
def profiles(store) -> Profiles:
    return Profiles(store)


def own_times(result) -> dict[str, float]:
    table = result.table  # the fetch method's answer for the same selection
    column = "tottime" if result.profiler == "cprofile" else "self_time"
    out: dict[str, float] = defaultdict(float)
    for name, own in zip(table["function"].to_pylist(), table[column].to_pylist()):  # summed over groups
        out[name] += own
    return out


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_speedscope_file_follows_speedscopes_schema_and_adds_up(profiles, profiler):
    import jsonschema
    schema = json.loads((speedscope_package() / "dist" / "release" / "file-format-schema.json").read_text())
    result = profiles.by_job_phase(profiler=profiler)
    document = json.loads(SpeedscopeRenderer().render(result))
    jsonschema.validate(document, schema)
    (profile,) = document["profiles"]
    frames = document["shared"]["frames"]
    per_function: dict[str, float] = defaultdict(float)
    for sample, weight in zip(profile["samples"], profile["weights"]):
        frame = frames[sample[-1]]
        name = f"{frame['file']}:{frame['line']}({frame['name']})" if "file" in frame else frame["name"]
        per_function[name] += weight
    expected = own_times(result)
    assert math.isclose(sum(profile["weights"]), sum(expected.values()), rel_tol=1e-9)
    assert math.isclose(profile["endValue"], sum(expected.values()), rel_tol=1e-9)
    for name, own in expected.items():
        assert math.isclose(per_function.get(name, 0.0), own, rel_tol=1e-6, abs_tol=1e-9), name


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_collapsed_stacks_add_up_to_the_selection(profiles, profiler):
    result = profiles.by_step(0, 2, profiler=profiler)
    lines = CollapsedRenderer().render(result).decode().splitlines()
    assert lines and all(" " not in line.rsplit(" ", 1)[0] for line in lines)  # flamegraph.pl's format
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    expected = own_times(result)
    # Each line is rounded to a microsecond.
    assert abs(sum(counts) - sum(expected.values()) * 1e6) <= len(lines)
    leaves: dict[str, int] = defaultdict(int)
    for line, count in zip(lines, counts):
        leaves[line.rsplit(" ", 1)[0].split(";")[-1]] += count
    for name, own in expected.items():
        clean = name.replace(";", ",").replace(" ", "_")
        assert abs(leaves.get(clean, 0) - own * 1e6) <= len(lines), name


def test_a_pruned_tree_still_adds_up(profiles, monkeypatch):
    from proflake.render import exports, stacks

    monkeypatch.setattr(exports, "stacks", lambda result: stacks.stacks(result, budget=8))
    result = profiles.by_job_phase()
    document = json.loads(SpeedscopeRenderer().render(result))
    assert math.isclose(sum(document["profiles"][0]["weights"]), sum(own_times(result).values()), rel_tol=1e-9)


def test_prof_file_loads_in_pstats(profiles, tmp_path):
    result = profiles.by_step(0, 2)
    path = tmp_path / "steps.prof"
    path.write_bytes(PstatsRenderer().render(result))
    loaded = pstats.Stats(str(path))
    assert loaded.stats == result.to_pstats().stats
    assert math.isclose(loaded.total_tt, sum(result.table["tottime"].to_pylist()), rel_tol=1e-9)


def test_cli_export_every_format(store, tmp_path):
    for fmt in ("speedscope", "collapsed", "prof"):
        out = tmp_path / f"x.{fmt}"
        done = CliRunner().invoke(cli, ["export", "by-step", "1", "--store", store, "--format", fmt, "-o", str(out)])
        assert done.exit_code == 0, done.output
        assert out.stat().st_size > 0 and f"wrote {out}" in done.stderr
    done = CliRunner().invoke(cli, ["export", "job", "--store", store, "--format", "collapsed"])
    assert done.exit_code == 0 and done.stdout.count("\n") > 10 and done.stderr == ""


@pytest.mark.parametrize(
    ("fmt", "kind", "file"),
    [
        ("speedscope", "a file for another tool, not for reading on a terminal", "profile.speedscope.json"),
        ("collapsed", "a file for another tool, not for reading on a terminal", "profile.collapsed.txt"),
        ("prof", "binary data, which a terminal cannot show", "profile.prof"),
    ],
)
def test_cli_export_refuses_a_terminal_unless_given_a_file(store, tmp_path, monkeypatch, fmt, kind, file):
    """An export is a file for another tool (a step's speedscope file is tens of KB on one line): like
    --format parquet, it goes to --output FILE or a redirect, never onto a terminal."""
    from proflake.cli import export

    monkeypatch.setattr(export, "stdout_is_terminal", lambda: True)
    done = CliRunner().invoke(cli, ["export", "by-step", "1", "--store", store, "--format", fmt])
    assert done.exit_code == ExitCode.USAGE and done.stdout == ""
    assert done.stderr == f"proflake: error: --format {fmt} writes {kind}; pass --output FILE (or redirect: > {file})\n"
    out = tmp_path / file
    done = CliRunner().invoke(cli, ["export", "by-step", "1", "--store", store, "--format", fmt, "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert done.stdout == "" and out.stat().st_size > 0


def test_cli_export_refuses_what_a_format_cannot_hold(store):
    done = CliRunner().invoke(cli, ["export", "job", "--store", store, "--format", "prof", "--profiler", "pyinstrument"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr == "proflake: error: a .prof file holds cProfile data; this result is pyinstrument (try --format speedscope)\n"
    done = CliRunner().invoke(cli, ["export", "job", "--store", store, "--format", "svg"])
    assert done.exit_code == 2 and "'svg' is not one of" in done.stderr


def test_a_call_tree_deeper_than_the_recursion_limit_exports_and_reports(tmp_path):
    depth = 3_000
    frame = '{"function": "f", "file_path": "x.py", "line_no": 1, "time": 1.0, "children": ['
    text = '{"start_time": 2.0, "duration": 1.0, "root_frame": ' + frame * depth + "]}" * depth + "}"
    stats = tmp_path / "job" / "framework" / "pytorch" / "pyinstrument" / "algo-1" / "train-0-stepstart-2000000_train-0-stepend-3000000"
    stats.mkdir(parents=True)
    (stats / "python_stats.json").write_text(text)
    (stats / "python_stats.html").write_text("<html></html>")
    ingest(str(tmp_path / "job"), str(tmp_path / "store"))
    result = Profiles(str(tmp_path / "store")).by_step(0, profiler="pyinstrument")
    (line,) = CollapsedRenderer().render(result).decode().splitlines()
    assert line.count(";") == depth - 1 and line.endswith(" 1000000")
    flame = result.report().data["flame"]  # the budget cuts the chain: its rest is one [other] node
    assert flame["nodes"] <= 2000 and flame["name"][-1] == "[other]" and flame["value"][-1] == 1.0
    flame = result.report(flame_budget=depth + 10).data["flame"]
    assert max(flame["depth"]) == depth and flame["nodes"] == depth + 1


def test_the_cli_names_every_export_format():
    from proflake.cli.export import EXPORT_FORMAT_NAMES
    from proflake.render.exports import EXPORT_FORMATS

    assert EXPORT_FORMAT_NAMES == EXPORT_FORMATS
