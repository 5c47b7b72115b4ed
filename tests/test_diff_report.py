"""The diff page: DiffResult.report() and proflake diff --format html. Its data is the DiffResult's, its
flame graph the two sides' call trees merged (pyinstrument exact, cProfile derived), it is self-contained,
and the command writes it with the gate still deciding the exit code.

The browser half (the page renders, hover, search, sort, colours) is tests/test_diff_browser.py.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import test_diff_sides
from click.testing import CliRunner
from proflake.cli import cli
from proflake.errors import ExitCode, UsageError
from proflake.query.profiles import Profiles
from test_diff import FUNCTIONS, build_store, step_times
from test_diff_sides import EARLY, LATE, T0, same

drift = test_diff_sides.drift  # the fixture: one job whose later steps have backward 30% slower


def embedded(page: str) -> dict:
    text = page.split('id="proflake-data">', 1)[1].split("</script>", 1)[0]
    return json.loads(text)


@pytest.fixture(scope="module")
def pyinstrument_store(tmp_path_factory) -> Path:
    """Two pyinstrument jobs: forward 30% slower in b, checkpoint gone, an evaluate function new."""
    rng = np.random.default_rng(5)
    head = {**FUNCTIONS, "forward": FUNCTIONS["forward"] * 1.3}
    head.pop("checkpoint")
    jobs = {"a": {"algo-1": step_times(rng, FUNCTIONS, 10)}, "b": {"algo-1": step_times(rng, head, 8)}}
    return build_store(tmp_path_factory.mktemp("pyi"), jobs, profiler="pyinstrument")


def flame_own(flame: dict, side: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for name, own in zip(flame["name"], flame[f"{side}_own"]):
        out[name] += own
    return out


def test_page_embeds_the_diff_results_numbers(drift):
    result = Profiles(drift).diff(EARLY, LATE)
    page = result.report(fail_on_total=0.10, fail_on_function=0.10)
    data = embedded(page.html)
    assert data["diff"] == json.loads(json.dumps(result.to_dict(0.10, 0.10)))
    assert data["diff"]["gate"]["failed"] is True
    # the flame graph's root is the total per step on each side; its own times are each function's
    flame = data["flame"]
    assert flame["base"][0] == pytest.approx(result.total["base"], rel=1e-9)
    assert flame["head"][0] == pytest.approx(result.total["head"], rel=1e-9)
    assert flame["value"][0] == pytest.approx(flame["base"][0] + flame["head"][0])
    for side in ("base", "head"):
        own = flame_own(flame, side)
        for row in result.table.to_pylist():
            assert own[row["function"]] == pytest.approx(row[f"{side}_self"], rel=1e-9, abs=1e-12), row["function"]
    assert "derived" in page.html.lower() or "Derived" in page.html  # cProfile: said to be derived


def test_pyinstrument_page_is_exact_with_added_and_removed_frames(pyinstrument_store):
    result = Profiles(pyinstrument_store).diff("a", "b")
    data = result.report().data
    flame = data["flame"]
    assert flame["exact"] is True
    names = flame["name"]
    gone = names.index(next(n for n in names if n.endswith("(checkpoint)")))
    assert flame["head"][gone] == 0 and flame["base"][gone] > 0
    forward = names.index(next(n for n in names if n.endswith("(forward)")))
    rows = {r["function_name"]: r for r in result.table.to_pylist()}
    assert flame["base"][forward] == pytest.approx(rows["forward"]["base_cum"], rel=1e-9)
    assert flame["head"][forward] == pytest.approx(rows["forward"]["head_cum"], rel=1e-9)
    assert flame["base"][0] == pytest.approx(result.total["base"], rel=1e-9)
    assert data["diff"]["functions"] == result.to_dict()["functions"]


def test_per_second_flame_graph_divides_by_wall_seconds(drift):
    result = Profiles(drift).diff(EARLY, LATE, per="second")
    flame = result.report().data["flame"]
    assert flame["unit"] == "s/s"
    # every interval lasts 0.5 s, so per wall second is twice per step
    per_step = Profiles(drift).diff(EARLY, LATE).report().data["flame"]
    assert flame["base"][0] == pytest.approx(2 * per_step["base"][0])


def test_page_is_self_contained_and_notebooks_show_it(drift):
    result = Profiles(drift).diff(EARLY, LATE)
    page = result.report()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page.html, re.IGNORECASE)
    assert "https://" not in page.html and "http://" not in page.html.replace("http://www.w3.org/2000/svg", "")
    assert "default-src 'none'" in page.html
    assert page.html.count("<script") == 2
    assert result._repr_html_().startswith("<iframe srcdoc=")
    assert "diff" in repr(page)


def test_names_from_profiles_cannot_break_out_of_the_diff_page(drift):
    from proflake.render.report.page import render_html

    data = Profiles(drift).diff(EARLY, LATE).report().data
    data["diff"]["functions"][0]["function"] = "</script><script>alert(1)</script>"
    page = render_html(data, "diff")
    assert "<script>alert(1)" not in page
    assert embedded(page)["diff"]["functions"][0]["function"] == "</script><script>alert(1)</script>"


def test_cli_format_html_writes_the_page_and_keeps_the_gate(drift, tmp_path):
    out = tmp_path / "diff.html"
    args = ["diff", "drift", "--store", str(drift), "--base-time", f"{T0}:{T0 + 11.9}",
            "--head-time", f"{T0 + 12}:{T0 + 23.9}", "--format", "html", "-o", str(out), "--fail-on", "10%",
            "--top", "3"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == ExitCode.REGRESSION, done.output
    assert done.stdout == "" and f"wrote {out}" in done.stderr
    data = embedded(out.read_text(encoding="utf-8"))
    api = Profiles(drift).diff(EARLY, LATE).to_dict(0.10, 0.10)
    assert same(data["diff"]["functions"], api["functions"][:3])
    assert data["diff"]["gate"]["failed"] and len(data["diff"]["gate"]["reasons"]) == len(api["gate"]["reasons"])


def test_cli_format_html_is_refused_on_a_terminal(pyinstrument_store, monkeypatch):
    import proflake.cli.diff as command

    monkeypatch.setattr(command, "stdout_is_terminal", lambda: True)
    done = CliRunner().invoke(cli, ["diff", "a", "b", "--store", str(pyinstrument_store), "--format", "html"])
    assert done.exit_code == ExitCode.USAGE and done.stdout == ""
    assert "pass --output FILE" in done.stderr


def test_cli_format_html_to_a_pipe(pyinstrument_store):
    done = CliRunner().invoke(cli, ["diff", "a", "b", "--store", str(pyinstrument_store), "--format", "html"])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("<!DOCTYPE html>")
    assert embedded(done.stdout)["flame"]["exact"] is True


def test_a_diff_result_not_from_profiles_has_no_page(drift):
    result = Profiles(drift).diff(EARLY, LATE)
    result._profiles = None
    with pytest.raises(UsageError, match="not made by Profiles.diff"):
        result.report()


def test_a_side_that_selected_nothing_still_gets_a_page(drift):
    result = Profiles(drift).diff(EARLY, {"job": "drift", "start_step": 500, "end_step": 600})
    assert result.head.intervals == 0 and any("selected no intervals" in w for w in result.warnings)
    data = result.report().data
    assert data["flame"]["head"][0] == 0 and data["flame"]["base"][0] == pytest.approx(result.total["base"])
    assert data["diff"]["warnings"] == result.warnings
