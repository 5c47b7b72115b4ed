"""The pages' numbers and layout in a real browser (chromium via playwright, as tests/test_report_browser.py):
every number the report's and the diff page's tables show is written as proflake.numbers writes it (the
page's script is a port: the same rules, held equal here on real answers), titles name the selection, the
diff table's function column stays readable at 1,400 px with real-length paths, and the step timeline
stays readable for many nodes and hundreds of steps. Screenshots go to .artifacts/pages/.
"""

from __future__ import annotations

import marshal
from pathlib import Path

import numpy as np
import pytest
from proflake import numbers
from proflake.ingestion.batch import ingest
from proflake.query.profiles import Profiles
from test_report_browser import ROOT, Page

pytestmark = pytest.mark.integration

ARTIFACTS = ROOT / ".artifacts" / "pages"
SITE = "/opt/conda/envs/pytorch/lib/python3.10/site-packages"
# Functions as a real PyTorch job names them: long paths, long built-in names; (file, line, name): seconds
FUNCTIONS = {
    (f"{SITE}/torch/nn/modules/module.py", 1501, "_call_impl"): 0.030,
    (f"{SITE}/torch/autograd/__init__.py", 200, "backward"): 0.110,
    (f"{SITE}/torch/optim/optimizer.py", 280, "wrapper"): 0.004,
    (f"{SITE}/torch/utils/data/_utils/collate.py", 84, "default_collate"): 0.0009,
    (f"{SITE}/torch/nn/modules/conv.py", 459, "_conv_forward"): 0.052,
    (f"{SITE}/torchvision/transforms/v2/functional/_geometry.py", 1120, "resized_crop_image"): 0.0031,
    ("~", 0, "<method 'run_backward' of 'torch._C._EngineBase' objects>"): 0.210,
    ("~", 0, "<built-in method torch._C._nn.cross_entropy_loss>"): 0.00042,
    ("/home/ml/projects/vision/experiments/resnet/train.py", 88, "train_step"): 0.00001,
}
ROOT_KEY = ("/home/ml/projects/vision/experiments/resnet/train.py", 40, "main")


def write_step(folder: Path, times: dict[tuple, float], calls: int) -> None:
    """One cProfile dump: every function called ``calls`` times from main, with these own times."""
    folder.mkdir(parents=True, exist_ok=True)
    stats = {key: (calls, calls, t, t, {ROOT_KEY: (calls, calls, t, t)}) for key, t in times.items()}
    stats[ROOT_KEY] = (1, 1, 0.0, sum(times.values()), {})
    (folder / "python_stats").write_bytes(marshal.dumps(stats))


STRAGGLERS = {("algo-4", 100): 3.0, ("algo-2", 251): 2.5, ("algo-6", 17): 2.2}  # (node, step): wall time factor


def write_job(root: Path, job: str, nodes: int, steps: int, rng: np.random.Generator, slow: dict | None = None,
              stragglers: dict | None = None) -> None:
    """``nodes`` x ``steps`` train steps of FUNCTIONS (jittered; ``slow`` multiplies some), one second apart,
    each ~0.5 s of wall time (``stragglers`` multiplies some node-steps')."""
    for n in range(nodes):
        for step in range(steps):
            start = 1_700_000_000_000_000 + step * 1_000_000
            factor = rng.lognormal(0.0, 0.05)
            times = {k: v * factor * (slow or {}).get(k[2], 1.0) * rng.lognormal(0.0, 0.05) for k, v in FUNCTIONS.items()}
            wall = round(300_000 * factor * (stragglers or {}).get((f"algo-{n + 1}", step), 1.0))
            name = f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + wall}"
            write_step(root / job / "framework" / "pytorch" / "cprofile" / f"algo-{n + 1}" / name, times, 1 + step % 3)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """run-a and run-b (2 nodes x 8 steps; backward 40% slower in run-b) and wide (6 nodes x 300 steps)."""
    tmp = tmp_path_factory.mktemp("pages")
    rng = np.random.default_rng(3)
    write_job(tmp / "jobs", "run-a", 2, 8, rng)
    write_job(tmp / "jobs", "run-b", 2, 8, rng, slow={"backward": 1.4})
    write_job(tmp / "jobs", "wide", 6, 300, rng, stragglers=STRAGGLERS)
    ingest(str(tmp / "jobs"), str(tmp / "store"), workers=1)
    return tmp / "store"


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def open_page(browser, path: Path) -> Page:
    view = Page(browser, path.as_uri())
    view.page.wait_for_selector("body[data-ready='1']", timeout=15000)
    return view


def test_report_tables_write_numbers_as_proflake_numbers_does(browser, store, tmp_path):
    result = Profiles(str(store)).fetch("by_job_phase", job="run-a")
    view = open_page(browser, result.report().write(tmp_path / "report.html"))
    page = view.page
    # Titled by what was selected, not by the fetch method's grouping.
    assert page.locator("#title").inner_text() == "run-a · whole job"
    assert "by-job-phase" not in page.title() and "by-job-phase" not in page.locator("#subtitle").inner_text()
    expected = {r["function"]: r for r in result.table.to_pylist()}
    rows = page.locator("#functions-table tbody tr")
    assert rows.count() == len(expected)
    for i in range(rows.count()):
        name = rows.nth(i).get_attribute("data-function")
        cells = rows.nth(i).locator("td").all_inner_texts()
        want = expected[name]
        calls = numbers.count(want["total_calls"])
        if want["primitive_calls"] != want["total_calls"]:
            calls += "/" + numbers.count(want["primitive_calls"])
        assert cells[1:4] == [numbers.seconds(want["tottime"]), numbers.seconds(want["cumtime"]), calls], name
    headers = page.locator("#functions-table th").all_inner_texts()
    assert not any("(s)" in h for h in headers)
    # Times are ISO 8601 in UTC.
    assert "from 2023-11-14T22:13:20.000Z to " in page.locator("#overview-body").inner_text()
    assert view.errors == [] and view.outside() == []


def test_diff_table_numbers_and_a_readable_function_column_at_1400_px(browser, store, tmp_path):
    result = Profiles(str(store)).diff("run-a", "run-b")
    view = open_page(browser, result.report().write(tmp_path / "diff.html"))
    page = view.page
    assert page.viewport_size["width"] == 1400
    shoot(page, "diff-1400")
    rows = {r["function"]: r for r in result.table.to_pylist()}
    shown = page.locator("#diff-table tbody tr")
    assert shown.count() == len(rows)
    keys = page.locator("#diff-table th").evaluate_all("(ths) => ths.map((t) => t.getAttribute('data-key'))")
    for i in range(shown.count()):
        row = rows[shown.nth(i).get_attribute("data-function")]
        cells = dict(zip(keys, shown.nth(i).locator("td").all_inner_texts()))
        assert cells["base_self"] == numbers.seconds(row["base_self"])
        assert cells["head_self"] == numbers.seconds(row["head_self"])
        change = numbers.seconds(row["self_change"])
        assert cells["self_change"] == ("+" + change if row["self_change"] > 0 else change)
        if row["self_change_ratio"] is not None:
            assert cells["self_change_ratio"] == numbers.percent(row["self_change_ratio"])
        assert cells["p_adjusted"] == numbers.p_value(row["p_adjusted"])
        assert cells["base_calls"] == numbers.count(row["base_calls"])
    total = result.total
    assert numbers.percent(total["change_ratio"]) in page.locator("#summary-cards").inner_text()

    # The function column: wide enough for a function's name and the end of its path, each on one line.
    widths = page.locator("#diff-table td.fn2").evaluate_all("(tds) => tds.map((td) => td.getBoundingClientRect().width)")
    assert min(widths) >= 250, widths
    for i in range(shown.count()):
        cell = shown.nth(i).locator("td.fn2")
        line = cell.locator("div.name").evaluate("(d) => parseFloat(getComputedStyle(d).lineHeight)")
        lines = cell.evaluate("(td) => { var r = td.getClientRects()[0], s = getComputedStyle(td); "
                              "return r.height - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom) - parseFloat(s.borderBottomWidth); }")
        assert lines <= 2 * line + 1, (shown.nth(i).get_attribute("data-function"), lines, line)
        # ... and nothing is cut: each line's text fits its box
        cut = cell.locator("div").evaluate_all("(ds) => ds.filter((d) => d.scrollWidth > d.clientWidth + 1).map((d) => d.textContent)")
        assert cut == [], shown.nth(i).get_attribute("data-function")
    # The table fits the page: no horizontal scrolling at 1,400 px.
    assert page.locator("#diff-table").evaluate("(t) => t.parentElement.scrollWidth <= t.parentElement.clientWidth + 1")
    assert view.errors == [] and view.outside() == []


def test_the_pages_port_of_proflake_numbers_writes_what_python_writes(browser, store, tmp_path):
    """common.js's seconds, percent, count and pval against proflake.numbers over values of every magnitude
    (random mantissas from 1 ns to 10^5 s and the rounding edges)."""
    rng = np.random.default_rng(5)
    values = [float(m * 10.0**e) for e in range(-9, 6) for m in rng.uniform(1, 10, 12)]
    edges = [0.9995, 0.99949, 9.995, 9.9949, 99.95, 99.949, 999.5, 999.49, 1e-4, 9.9e-5, 0.00123, 1234567.8]
    values += edges + [-v for v in values[::7] + edges] + [0.0, 3.0, 12.0, 33825.0]
    common = (ROOT / "etl" / "proflake" / "render" / "report" / "static" / "common.js").read_text()
    view = open_page(browser, Profiles(str(store)).fetch("by_job_phase", job="run-a").report().write(tmp_path / "r.html"))
    written = view.page.evaluate(
        "(values) => {" + common + "; return values.map((v) => [seconds(v), percent(v), count(v), pval(Math.abs(v))]); }", values
    )
    for v, (sec, pct, cnt, p) in zip(values, written):
        assert sec == numbers.seconds(v), v
        assert pct == numbers.percent(v), v
        assert cnt == numbers.count(v), v
        assert p == numbers.p_value(abs(v)), v
    assert view.errors == []


def test_the_step_timeline_of_6_nodes_and_300_steps_is_readable(browser, store, tmp_path):
    result = Profiles(str(store)).fetch("by_job_phase", job="wide")
    view = open_page(browser, result.report().write(tmp_path / "wide.html"))
    page = view.page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#timeline").screenshot(path=str(ARTIFACTS / "timeline-6x300.png"))
    # The slowest node-steps, from the intervals themselves: a step's wall time is its interval's length here.
    walls = sorted(((r["end_time_us"] - r["start_time_us"]) / 1e6, r["start_step"], r["node_id"])
                   for r in result.intervals.to_pylist() if r["start_mode"] == "train" and r["start_step"] == r["end_step"])
    slowest = sorted(walls, key=lambda w: (-w[0], w[1], w[2]))[:10]
    assert {(node, step) for node, step in STRAGGLERS} <= {(n, s) for _, s, n in slowest}
    assert page.locator("#timeline-chart").count() == 0  # no line per node
    # One cell per node and step, in step order along the row, at least 2 px wide.
    cells = page.locator("#timeline-heatmap rect[data-node]:not(.slow)").evaluate_all(
        "(rs) => rs.map((r) => [r.getAttribute('data-node'), +r.getAttribute('data-step'), +r.getAttribute('x'), +r.getAttribute('width'), +r.getAttribute('y')])")
    assert len(cells) == len(walls) == 6 * 300
    by_node: dict[str, list] = {}
    for node, step, x, width, y in cells:
        by_node.setdefault(node, []).append((step, x, y))
        assert width >= 2
    assert sorted(by_node) == [f"algo-{i}" for i in range(1, 7)]
    for row in by_node.values():
        assert [x for _, x, _ in sorted(row)] == sorted(x for _, x, _ in row) and len({y for _, _, y in row}) == 1
    # Every node is labelled, the labels apart; the step axis has at least 5 labels that do not overlap.
    labels = page.locator("#timeline-heatmap text.node-label").evaluate_all(
        "(ts) => ts.map((t) => [t.textContent, t.getBBox().y, t.getBBox().height])")
    assert [t for t, _, _ in labels] == sorted(by_node)
    assert all(b[1] >= a[1] + a[2] for a, b in zip(labels, labels[1:]))
    ticks = page.locator("#timeline-ticks text").evaluate_all(
        "(ts) => ts.map((t) => [+t.textContent, t.getBBox().x, t.getBBox().width])")
    assert len(ticks) >= 5 and [t for t, _, _ in ticks] == sorted(t for t, _, _ in ticks)
    assert ticks[0][0] <= 50 and ticks[-1][0] >= 250
    assert all(b[1] > a[1] + a[2] for a, b in zip(ticks, ticks[1:]))
    # The slowest node-steps are outlined and listed, with their wall time as proflake.numbers writes it.
    marked = page.locator("#timeline-slowest rect.slow").evaluate_all(
        "(rs) => rs.map((r) => [r.getAttribute('data-node'), +r.getAttribute('data-step')])")
    assert [tuple(m) for m in marked] == [(n, s) for _, s, n in slowest]
    listed = page.locator("#timeline-slowest-table tbody tr").evaluate_all(
        "(trs) => trs.map((tr) => Array.from(tr.children).map((td) => td.textContent))")
    assert [(int(r[0]), r[1], r[2]) for r in listed] == [(s, n, numbers.seconds(w)) for w, s, n in slowest]
    # Hover says which node and step, and its wall time.
    node, step = next(iter(STRAGGLERS))
    page.locator(f"#timeline-heatmap rect[data-node='{node}'][data-step='{step}']:not(.slow)").hover(force=True)
    wall = next(w for w, s, n in walls if (n, s) == (node, step))
    assert page.locator("#tip").inner_text() == f"{node}, step {step}: {numbers.seconds(wall)}"
    assert view.errors == [] and view.outside() == []
