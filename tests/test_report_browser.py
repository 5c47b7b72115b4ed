"""The report in a real browser: Debian's chromium, headless, driven by playwright (its own browser download
is never used). Every section renders, nothing logs an error, no request leaves file://, the flame graph's
search and zoom work, the numbers on the page are the fetch methods' answers, and speedscope's own app
(from its npm package) opens our speedscope export. Screenshots of each section go to .artifacts/report/.

Set-up: chromium and speedscope's npm package are installed by bin/setup-test (bin/test calls it before
pytest); a test never installs anything, and fails saying to run bin/setup-test when chromium is missing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from proflake import Profiles, ingest, numbers
from proflake.capture.sample_job import generate_sample_job
from proflake.pages import export as export_file

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / ".artifacts" / "report"
SECTIONS = ("overview", "timeline", "phases", "functions", "flame", "nodes")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> Profiles:
    base = tmp_path_factory.mktemp("browser")
    generate_sample_job(base / "browser-job", nodes=2, train_steps=4, eval_steps=2)
    ingest(str(base / "browser-job"), str(base / "store"))
    return Profiles(str(base / "store"))


class Page:
    """A page opened from file:// with every console error, page error and non-file request recorded."""

    def __init__(self, browser, url: str) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)

    def outside(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file://", "data:", "about:"))]


def shoot(page, name: str, selector: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(selector).screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_cprofile_report_renders_every_section_offline(browser, profiles, tmp_path):
    result = profiles.by_job_phase()
    path = result.report().write(tmp_path / "job.html")
    view = Page(browser, path.as_uri())
    page = view.page
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    for section in SECTIONS:
        body = page.locator(f"#{section}-body")
        assert body.inner_text().strip(), f"section {section} is empty"
        shoot(page, f"cprofile-{section}", f"#{section}")
    page.screenshot(path=str(ARTIFACTS / "cprofile-page.png"), full_page=True)

    # The top functions table shows the fetch method's numbers (rounded as the page rounds them).
    expected = {r["function"]: r for r in result.table.to_pylist()}
    first = page.locator("#functions-table tbody tr").first
    cells = first.locator("td").all_inner_texts()
    want = expected[cells[0]]
    assert cells[1:3] == [numbers.seconds(want["tottime"]), numbers.seconds(want["cumtime"])]
    assert want["cumtime"] == max(r["cumtime"] for r in expected.values())  # sorted by cumtime first
    # Sorting by own time puts the largest tottime first.
    page.locator("#functions-table th[data-key='own']").click()
    top_own = page.locator("#functions-table tbody tr").first.locator("td").first.inner_text()
    assert top_own == max(expected.values(), key=lambda r: (r["tottime"], r["function"]))["function"]
    # A row opens its callers and callees.
    page.locator("#functions-table tbody tr").nth(1).click()
    assert page.locator("#edges-title").inner_text().startswith("Callers and callees of")
    shoot(page, "cprofile-callers", "#edges")

    # Flame graph: search highlights, zoom narrows, reset restores.
    svg = page.locator("#flame-svg")
    shown = int(svg.get_attribute("data-shown"))
    page.fill("#flame-search", "sample_job")
    assert int(svg.get_attribute("data-matches")) > 0
    assert "matched:" in page.locator("#flame-status").inner_text()
    shoot(page, "cprofile-flame-search", "#flame")
    page.fill("#flame-search", "")
    assert int(svg.get_attribute("data-matches")) == 0
    target = page.locator("#flame-svg rect[data-index]:not([display])").nth(3)
    index = target.get_attribute("data-index")
    target.click()
    assert svg.get_attribute("data-zoom") == index
    assert int(svg.get_attribute("data-shown")) < shown
    shoot(page, "cprofile-flame-zoom", "#flame")
    page.click("#flame-reset")
    assert svg.get_attribute("data-zoom") == "0" and int(svg.get_attribute("data-shown")) == shown
    # Hover shows the numbers.
    page.locator("#flame-svg rect[data-index='0']").hover()
    flame = result.report().data["flame"]
    tip = page.locator("#tip").inner_text()  # durations as proflake.numbers writes them, like the tables
    assert f"{numbers.seconds(flame['value'][0])} inclusive" in tip and f"{numbers.seconds(flame['own'][0])} own" in tip, tip

    assert view.errors == []
    assert view.outside() == []


def test_pyinstrument_report_renders(browser, profiles, tmp_path):
    result = profiles.by_step(0, 3, profiler="pyinstrument")
    path = result.report().write(tmp_path / "pyinstrument.html")
    view = Page(browser, path.as_uri())
    view.page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert "merged exactly" in view.page.locator("#flame-kind").inner_text()
    for section in SECTIONS:
        assert view.page.locator(f"#{section}-body").inner_text().strip(), section
    shoot(view.page, "pyinstrument-flame", "#flame")
    assert view.errors == [] and view.outside() == []


def test_speedscope_opens_our_export(browser, profiles, tmp_path):
    from test_report_exports import speedscope_package

    app = speedscope_package() / "dist" / "release" / "index.html"
    export = tmp_path / "job.speedscope.json"
    export.write_bytes(export_file(profiles.by_job_phase(), "speedscope"))
    view = Page(browser, app.as_uri())
    view.page.set_input_files("#file", str(export))
    view.page.wait_for_function("document.title.indexOf('job.speedscope.json') >= 0 || document.title.indexOf('whole job') >= 0", timeout=15000)
    view.page.wait_for_selector("canvas", timeout=15000)
    view.page.screenshot(path=str(ARTIFACTS / "speedscope.png"))
    assert view.errors == []
    assert view.outside() == []


def test_speedscope_opens_the_export_of_recursive_code_and_the_report_says_what_is_estimated(browser, tmp_path):
    """The recursive job of tests/helpers/recursive_job.py (see test_report_exports.py for its numbers):
    speedscope's app opens its export, and the report's flame graph carries the estimate's sentence."""
    from helpers.recursive_job import write_job
    from test_report_exports import speedscope_package

    write_job(tmp_path / "recursive-job")
    ingest(str(tmp_path / "recursive-job"), str(tmp_path / "store"))
    result = Profiles(str(tmp_path / "store")).by_job_phase()
    export = tmp_path / "recursive.speedscope.json"
    export.write_bytes(export_file(result, "speedscope"))
    view = Page(browser, (speedscope_package() / "dist" / "release" / "index.html").as_uri())
    view.page.set_input_files("#file", str(export))
    view.page.wait_for_function("document.title.indexOf('recursive.speedscope.json') >= 0 || document.title.indexOf('recursive-job') >= 0", timeout=15000)
    view.page.wait_for_selector("canvas", timeout=15000)
    view.page.screenshot(path=str(ARTIFACTS / "speedscope-recursive.png"))
    assert view.errors == [] and view.outside() == []

    report = Page(browser, result.report().write(tmp_path / "recursive.html").as_uri())
    report.page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert report.page.locator("#flame-estimate").inner_text() == result.report().data["flame"]["note"]
    shoot(report.page, "cprofile-recursive-flame", "#flame")
    assert report.errors == [] and report.outside() == []


def test_setup_script_is_idempotent_when_everything_is_there(browser):
    done = subprocess.run([str(ROOT / "bin" / "setup-test")], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "" and "installing" not in done.stderr, done.stderr
