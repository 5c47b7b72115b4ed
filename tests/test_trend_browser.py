"""The trend page in a real browser (Debian's chromium, headless, driven by playwright, as
tests/test_report_browser.py): the charts render with the change points marked at the right jobs, it logs
no error and requests nothing beyond file://, a hover shows a job's numbers as proflake.numbers writes
them, and a click on a change (its mark or its row) shows the diff of the last job before it and the first
after, with Profiles.diff's numbers and the command of the full diff page. On both profilers; with no
change points the page says so; with hundreds of jobs the job labels stay apart. Screenshots go to
.artifacts/trend/.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from proflake.numbers import p_value, percent, seconds
from proflake.pages import build_trend_report
from proflake.query.profiles import Profiles
from proflake.query.trend import TrendResult
from test_report_browser import ROOT, Page
from test_trend_page import stores  # noqa: F401 - the fixture: "mixed" and "steady" on both profilers

pytestmark = pytest.mark.integration

ARTIFACTS = ROOT / ".artifacts" / "trend"


def shoot(page, name: str, selector: str | None = None) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if selector is None:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    else:
        page.locator(selector).screenshot(path=str(ARTIFACTS / f"{name}.png"))


def open_page(browser, report, path) -> Page:
    view = Page(browser, report.write(path).as_uri())
    view.page.wait_for_selector("body[data-ready='1']", timeout=15000)
    return view


def cells(row) -> list[str]:
    return row.locator("td").all_inner_texts()


def test_the_page_marks_the_changes_and_a_click_shows_the_diff_either_side(browser, stores, tmp_path):  # noqa: F811
    profiler, store = stores["profiler"], stores["mixed"]
    profiles = Profiles(store)
    result = profiles.trend()
    report = result.report()
    view = open_page(browser, report, tmp_path / "trend.html")
    page = view.page
    for section in ("summary", "changes", "series"):
        assert page.locator(f"#{section}-body").inner_text().strip(), section
    shoot(page, f"{profiler}-page")
    assert page.locator("#title").inner_text() == f"proflake trend: {len(result.jobs)} jobs ({result.jobs[0]} .. {result.jobs[-1]})"

    # One chart per charted series; each marks its changes, between the last job before and the first after.
    charts = report.data["charts"]
    assert page.locator(".trend-chart svg").count() == len(charts)
    for k, chart in enumerate(charts):
        marks = page.locator(f"#chart-{k} g.cp")
        expected = [c for c in result.changes if c["function"] == chart["function"]]
        assert [marks.nth(i).get_attribute("data-job") for i in range(marks.count())] == [c["job_id"] for c in expected]
        dots = page.locator(f"#chart-{k} circle.dot")
        assert dots.count() == len(result.jobs)
        for c in expected:  # the mark lies between the two jobs' points
            x = float(marks.nth(expected.index(c)).locator("line").get_attribute("x1"))
            before = float(dots.nth(c["job_index"] - 2).get_attribute("cx"))
            after = float(dots.nth(c["job_index"] - 1).get_attribute("cx"))
            assert before < x < after
    # the total is charted first, and load_batch, which changed twice, has both marks
    load = next(k for k, c in enumerate(charts) if c["label"].endswith("(load_batch)"))
    assert page.locator(f"#chart-{load} g.cp").count() == 2
    shoot(page, f"{profiler}-load-batch", f"#chart-{load}")

    # Hovering a job's point shows its mean and spread as the terminal writes them.
    rows = result.series.to_pylist()
    total = {r["job_id"]: r for r in rows if r["function"] is None}
    page.locator("#chart-0 circle.dot").nth(3).hover()
    tip = page.locator("#tip").inner_text()
    job = result.jobs[3]
    assert tip.startswith(f"{job} (job 4 of {len(result.jobs)})")
    assert f"(total): {seconds(total[job]['own_mean_s'])}/step, ± {seconds(total[job]['own_spread_s2'] ** 0.5)}" in tip
    assert f"of its {total[job]['steps']} steps" in tip

    # A click on load_batch's second mark (its fall back at job 7) shows the diff of jobs 6 and 7.
    change = [c for c in result.changes if c["function"] == charts[load]["function"]][1]
    base, head = result.jobs[change["job_index"] - 2], change["job_id"]
    page.locator(f"#chart-{load} g.cp").nth(1).locator("text").click()
    assert page.locator("#diff-title").inner_text() == (
        f"{charts[load]['label']} {percent(change['change'])} from {head}: {base} → {head}"
    )
    diff = profiles.diff(base, head, match="line", profiler=profiler)
    shown = page.locator("#diff-table tbody tr")
    assert cells(shown.nth(0)) == [
        "(total)", diff.total["status"], f"{seconds(diff.total['base'])}/step", f"{seconds(diff.total['head'])}/step",
        percent(diff.total["change_ratio"]), p_value(diff.total["p_adjusted"]),
    ]
    table = diff.table.to_pylist()
    assert shown.count() == 1 + len(table)  # six functions: every one fits in the compact table
    for i, r in enumerate(table, start=1):
        assert cells(shown.nth(i)) == [
            r["function"], r["status"], f"{seconds(r['base_self'])}/step", f"{seconds(r['head_self'])}/step",
            "new" if r["status"] == "added" else percent(r["self_change_ratio"]), p_value(r["p_adjusted"]),
        ]
    picked = page.locator("#diff-table tr.selected")
    assert picked.count() == 1 and cells(picked)[:2] == [charts[load]["function"], "faster"]
    assert page.locator("#diff-command").inner_text() == (
        f"proflake diff {base} {head} --profiler {profiler} --match line --store {store} --format html -o diff.html"
    )
    assert page.locator(f"#chart-{load} g.cp.selected").get_attribute("data-job") == head
    shoot(page, f"{profiler}-diff", "#diff")

    # A click on a row of the changes table does the same for its change: the total's rise at job 4.
    first = result.changes[0]
    assert first["function"] is None
    page.locator("#changes-table tbody tr").nth(0).click()
    assert page.locator("#diff-title").inner_text().endswith(f"{result.jobs[first['job_index'] - 2]} → {first['job_id']}")
    assert page.locator("#changes-table tr.selected").get_attribute("data-job") == first["job_id"]
    assert page.locator("#chart-0 g.cp.selected").get_attribute("data-job") == first["job_id"]
    assert cells(page.locator("#diff-table tr.selected"))[0] == "(total)"

    assert view.errors == []
    assert view.outside() == []


def test_with_no_change_points_the_page_says_so(browser, stores, tmp_path):  # noqa: F811
    result = Profiles(stores["steady"]).trend()
    view = open_page(browser, result.report(), tmp_path / "steady.html")
    page = view.page
    assert "No change point" in page.locator("#no-changes").inner_text()
    assert page.locator("g.cp").count() == 0 and page.locator(".trend-chart svg").count() >= 1
    assert page.locator("#diff-none").inner_text() == "No change points, so no diff to show."
    shoot(page, f"{stores['profiler']}-steady")
    assert view.errors == [] and view.outside() == []


def test_hundreds_of_jobs_keep_their_labels_apart_and_a_change_past_the_cap_names_its_command(browser, tmp_path):
    """A hand-made result of 400 jobs (no store: with max_diffs=0 the page diffs nothing) and one change."""
    n = 400
    jobs = [f"nightly-{j:04d}" for j in range(n)]
    series = pa.Table.from_pylist([
        {"job_id": job, "job_index": i + 1, "job_start_time": 1_700_000_000_000_000 + i * 86_400_000_000,
         "function": None, "steps": 24, "own_mean_s": 0.1 if i < 300 else 0.13, "own_spread_s2": 1e-4}
        for i, job in enumerate(jobs)
    ])
    change = {"function": None, "job_id": jobs[300], "job_index": 301, "before_s": 0.1, "after_s": 0.13, "change": 0.3,
              "p_value": 1e-30, "before_jobs": 300, "after_jobs": 100, "before_steps": 7200, "after_steps": 2400}
    result = TrendResult("cprofile", None, jobs, 0.1, 0.01, 0.05, series, [change], 1)
    view = open_page(browser, build_trend_report(result, max_diffs=0), tmp_path / "many.html")
    page = view.page
    labels = page.locator("#chart-0 text.job-label")
    anchors = [float(t.split("translate(")[1].split(",")[0]) for t in
               page.eval_on_selector_all("#chart-0 text.job-label", "e => e.map(t => t.getAttribute('transform'))")]
    assert 20 <= labels.count() < n
    assert min(b - a for a, b in zip(anchors, anchors[1:])) >= 16
    assert labels.nth(0).inner_html() == "nightly-0000"
    width = page.eval_on_selector("#chart-0 svg", "s => s.getBoundingClientRect().width")
    assert width <= page.eval_on_selector("#series-body", "b => b.getBoundingClientRect().width")
    assert page.locator("#chart-0 g.cp").get_attribute("data-job") == "nightly-0300"
    page.locator("#chart-0 g.cp text").click()
    assert "not among the 0 largest" in page.locator("#diff-missing").inner_text()
    assert page.locator("#diff-command").inner_text().startswith("proflake diff nightly-0299 nightly-0300 --profiler cprofile ")
    assert "The diffs of the 0 largest changes are in this page (0 of 1)" in page.locator("#diffs-note").inner_text()
    shoot(page, "many-jobs", "#chart-0")
    assert view.errors == [] and view.outside() == []
