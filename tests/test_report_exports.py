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
from proflake.pages import export

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
    document = json.loads(export(result, "speedscope"))
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
    lines = export(result, "collapsed").decode().splitlines()
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
    document = json.loads(export(result, "speedscope"))
    assert math.isclose(sum(document["profiles"][0]["weights"]), sum(own_times(result).values()), rel_tol=1e-9)


def test_prof_file_loads_in_pstats(profiles, tmp_path):
    result = profiles.by_step(0, 2)
    path = tmp_path / "steps.prof"
    path.write_bytes(export(result, "prof"))
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
    (line,) = export(result, "collapsed").decode().splitlines()
    assert line.count(";") == depth - 1 and line.endswith(" 1000000")
    flame = result.report().data["flame"]  # the budget cuts the chain: its rest is one [other] node
    assert flame["nodes"] <= 2000 and flame["name"][-1] == "[other]" and flame["value"][-1] == 1.0
    flame = result.report(flame_budget=depth + 10).data["flame"]
    assert max(flame["depth"]) == depth and flame["nodes"] == depth + 1


def test_the_cli_names_every_export_format():
    from proflake.cli.export import EXPORT_FORMAT_NAMES
    from proflake.render.exports import EXPORT_FORMATS

    assert EXPORT_FORMAT_NAMES == EXPORT_FORMATS


# -- the cProfile tree on recursive code ------------------------------------------------------------------
# A real job profiled with cProfile here (tests/helpers/recursive_job.py: fib, is_even/is_odd, a tree walk
# through a generator expression, and a checksum called from two places), compared with pstats over the
# same files. Before the tree folded recursion, 48% of its weight sat under false roots.


@pytest.fixture(scope="module")
def recursive(tmp_path_factory):
    from helpers.profiles import pstats_of
    from helpers.recursive_job import write_job

    base = tmp_path_factory.mktemp("recursive")
    files = write_job(base / "recursive-job")
    ingest(str(base / "recursive-job"), str(base / "store"))
    return Profiles(str(base / "store")), pstats_of(files)


def cycles(stats: dict) -> list[set]:
    """The recursive cycles of pstats' call graph, by reachability (each function with those it reaches
    and that reach it), self-calls included."""
    callees: dict = defaultdict(set)
    for callee, value in stats.items():
        for caller in value[4]:
            callees[caller].add(callee)

    def reach(start) -> set:
        seen, todo = set(), [start]
        while todo:
            for g in callees[todo.pop()]:
                if g not in seen:
                    seen.add(g)
                    todo.append(g)
        return seen

    reached = {f: reach(f) for f in stats}
    return [{g for g in reached[f] if f in reached.get(g, ())} for f in stats if f in reached[f]]


def test_the_recursive_job_is_recursive(recursive):
    _, stats = recursive
    by_name = {k[2]: k for k in stats}
    assert stats[by_name["fib"]][1] > stats[by_name["fib"]][0]  # recursive calls: total > primitive
    found = cycles(stats)
    assert {by_name["is_even"], by_name["is_odd"]} in found
    assert any(by_name["walk"] in c and any(k[2] == "<genexpr>" for k in c) for c in found)
    assert len(stats[by_name["checksum"]][4]) == 2  # called from two places


def test_speedscope_of_recursive_code_keeps_stacks_honest(recursive):
    import jsonschema
    from helpers.recursive_job import honesty

    profiles, stats = recursive
    document = json.loads(export(profiles.by_job_phase(), "speedscope"))
    jsonschema.validate(document, json.loads((speedscope_package() / "dist" / "release" / "file-format-schema.json").read_text()))
    h = honesty(document, stats)
    assert h["false_root_share"] <= 0.05, h["false_root_share"]
    assert math.isclose(h["total"], sum(v[2] for v in stats.values()), rel_tol=1e-9)
    for name, f in h["functions"].items():
        assert math.isclose(f["own"], f["tottime"], rel_tol=1e-6, abs_tol=1e-9), name
        # a frame's inclusive time (the stacks it is on, each once) never exceeds its cumtime: no re-entry
        # of a recursion is counted twice
        assert f["inclusive"] <= f["cumtime"] * (1 + 1e-6) + 1e-9, (name, f)


def flame_paths(flame: dict, own: str = "own") -> dict[tuple, float]:
    """A pre-order flame graph's own seconds per call path (names, root first, "all" left out)."""
    out: dict[tuple, float] = defaultdict(float)
    path: list[str] = []
    for name, depth, seconds in zip(flame["name"], flame["depth"], flame[own]):
        del path[max(depth - 1, 0):]
        if depth:
            path.append(name)
            out[tuple(path)] += seconds
    return {p: s for p, s in out.items() if s > 0}


def test_report_diff_page_and_exports_draw_the_same_tree(recursive):
    from proflake.pages import report_data

    profiles, _ = recursive
    result = profiles.by_job_phase()
    drawn = flame_paths(report_data(result)["flame"])
    document = json.loads(export(result, "speedscope"))
    frames = [f"{f['file']}:{f['line']}({f['name']})" if "file" in f else f["name"] for f in document["shared"]["frames"]]
    (profile,) = document["profiles"]
    exported: dict[tuple, float] = defaultdict(float)
    for sample, weight in zip(profile["samples"], profile["weights"]):
        exported[tuple(frames[i] for i in sample)] += weight
    assert drawn.keys() == exported.keys()
    for path, seconds in drawn.items():
        assert math.isclose(exported[path], seconds, rel_tol=1e-9), path
    collapsed = {}
    for line in export(result, "collapsed").decode().splitlines():
        stack, micros = line.rsplit(" ", 1)
        collapsed[stack] = int(micros)
    clean = {";".join(n.replace(";", ",").replace(" ", "_") for n in path): s for path, s in drawn.items()}
    assert {k for k, s in clean.items() if round(s * 1e6) > 0} == collapsed.keys()
    for stack, micros in collapsed.items():
        assert abs(micros - clean[stack] * 1e6) <= 0.5 + 1e-6, stack
    # The diff page merges each side's tree by call path: the job against itself draws the same paths.
    # (It names a built-in by its function name, as the diff's table does.)
    as_diff = {
        r["function"]: r["function_name"] if r["filename"] == "~" else f"{r['filename']}:{r['lineno']}({r['function_name']})"
        for r in result.table.to_pylist()
    }
    diff = profiles.diff("recursive-job", "recursive-job", match="line").report().data["flame"]
    base = flame_paths(diff, "base_own")
    assert base.keys() == {tuple(as_diff[n] for n in path) for path in drawn}
    total = sum(drawn.values())
    for path, seconds in drawn.items():
        assert math.isclose(base[tuple(as_diff[n] for n in path)] / diff["base"][0], seconds / total, rel_tol=1e-9), path


def test_the_page_says_how_much_time_is_placed_by_estimate(recursive, profiles):
    """A function called from one call path (one caller, itself placed exactly, up to a root; in a
    recursive cycle, entered by one edge) is placed exactly; the share of the rest is on the page."""
    from proflake.numbers import percent
    from proflake.pages import report_data

    recursive_profiles, stats = recursive
    found = cycles(stats)
    cycle_of = {f: frozenset(c) for c in found for f in c}
    exact: dict = {}

    def is_exact(f) -> bool:
        if f not in exact:
            exact[f] = False  # while deciding (a cycle's own edges are not its callers)
            cycle = cycle_of.get(f, frozenset({f}))
            outside = [(c, g) for g in cycle for c in stats[g][4] if c not in cycle]
            inside = [c for c in stats[f][4] if c in cycle and c != f]
            if not outside:
                exact[f] = not inside or len(inside) == 1 and is_exact(inside[0])
            elif len(outside) == 1:
                caller, entry = outside[0]
                covered = stats[entry][4][caller][3] >= stats[entry][3] * (1 - 1e-9) - 1e-12 or len(cycle) > 1
                placed = f == entry or (len(stats[f][4]) == 1 and is_exact(inside[0]) if inside else False)
                exact[f] = is_exact(caller) and covered and placed
        return exact[f]

    total = sum(v[2] for v in stats.values())
    estimated = sum(v[2] for f, v in stats.items() if not is_exact(f)) / total
    assert 0 < estimated < 1  # checksum is called from two places; fib is on one path
    flame = report_data(recursive_profiles.by_job_phase())["flame"]
    assert math.isclose(flame["estimated_share"], estimated, rel_tol=1e-9)
    assert flame["note"].startswith(f"cProfile records callers, not stacks: {percent(estimated, sign=False)} of the time")
    page = recursive_profiles.by_job_phase().report().html
    assert flame["note"] in page
    pyinstrument = report_data(profiles.by_job_phase(profiler="pyinstrument"))["flame"]
    assert pyinstrument["estimated_share"] == 0 and pyinstrument["note"] == "pyinstrument records stacks: every frame is as recorded."


@pytest.mark.parametrize("budget", [4, 12])
def test_a_pruned_tree_of_recursive_code_keeps_own_times_and_true_roots(recursive, monkeypatch, budget):
    """What the budget folds away comes back on the function's drawn stacks, or below its callers' drawn
    path: never as a block of its own at the top."""
    from helpers.recursive_job import honesty
    from proflake.render import exports, stacks

    profiles, stats = recursive
    monkeypatch.setattr(exports, "stacks", lambda result: stacks.stacks(result, budget=budget))
    h = honesty(json.loads(export(profiles.by_job_phase(), "speedscope")), stats)
    assert h["false_root_share"] <= 0.05, h["false_root_share"]
    assert math.isclose(h["total"], sum(v[2] for v in stats.values()), rel_tol=1e-9)
    for name, f in h["functions"].items():
        assert math.isclose(f["own"], f["tottime"], rel_tol=1e-6, abs_tol=1e-9), name
