"""The diff page in a real browser (Debian's chromium, headless, driven by playwright, as
tests/test_report_browser.py): it renders, logs no error, requests nothing beyond file://, shows the
DiffResult's numbers, and its flame graph's hover, search, zoom and colouring and the table's sort and
filter work. Screenshots go to .artifacts/diff/.
"""

from __future__ import annotations

import math
import re

import pytest
from proflake import numbers
from proflake.query.profiles import Profiles
from test_diff_report import pyinstrument_store  # noqa: F401 - a fixture
from test_diff_sides import EARLY, LATE, T0, drift  # noqa: F401 - drift is a fixture
from test_report_browser import ROOT, Page

pytestmark = pytest.mark.integration

ARTIFACTS = ROOT / ".artifacts" / "diff"


def shoot(page, name: str, selector: str | None = None) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if selector is None:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    else:
        page.locator(selector).screenshot(path=str(ARTIFACTS / f"{name}.png"))


def rgb(fill: str) -> tuple[int, int, int]:
    r, g, b = (int(x) for x in re.findall(r"\d+", fill)[:3])
    return r, g, b


def test_cprofile_diff_page_renders_and_works_offline(browser, drift, tmp_path):  # noqa: F811
    result = Profiles(drift).diff(EARLY, LATE)
    path = result.report(fail_on_total=0.10, fail_on_function=0.10).write(tmp_path / "diff.html")
    view = Page(browser, path.as_uri())
    page = view.page
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    for section in ("summary", "flame", "table"):
        assert page.locator(f"#{section}-body").inner_text().strip(), section
        shoot(page, f"cprofile-{section}", f"#{section}")
    shoot(page, "cprofile-page")
    assert page.locator("#title").inner_text() == f"drift time {T0}..{T0 + 11.9} → drift time {T0 + 12}..{T0 + 23.9}"
    assert "FAILED" in page.locator("#gate-line").inner_text()
    assert "Derived from cProfile" in page.locator("#flame-kind").inner_text()
    assert page.locator("#flame-estimate").inner_text().startswith("cProfile records callers, not stacks: ")

    # The table is the DiffResult's, in its order (impact first), rounded as the page rounds.
    rows = result.table.to_pylist()
    first_row = page.locator("#diff-table tbody tr").first
    first = first_row.locator("td").all_inner_texts()
    assert first_row.get_attribute("data-function") == rows[0]["function"] and first[1] == rows[0]["status"] == "slower"
    assert first[0].splitlines()[0] == rows[0]["function_name"]  # the name, then where it is
    assert first[2:4] == [numbers.seconds(rows[0]["base_self"]), numbers.seconds(rows[0]["head_self"])]
    assert first[5] == numbers.percent(rows[0]["self_change_ratio"])
    assert page.locator("#diff-table tbody tr").count() == len(rows)
    # Sorting by the head's own time puts its largest first; again, its smallest.
    page.locator("#diff-table th[data-key='head_self']").click()
    top = page.locator("#diff-table tbody tr").first.get_attribute("data-function")
    assert top == max(rows, key=lambda r: r["head_self"])["function"]
    page.locator("#diff-table th[data-key='head_self']").click()
    bottom = page.locator("#diff-table tbody tr").first.get_attribute("data-function")
    assert bottom == min(rows, key=lambda r: r["head_self"])["function"]
    # The status filter keeps the significant rows.
    page.select_option("#table-status", "sig")
    shown = page.locator("#diff-table tbody tr").evaluate_all("(trs) => trs.map((tr) => tr.getAttribute('data-function'))")
    assert shown == [r["function"] for r in rows if r["status"] in ("slower", "faster")]
    shoot(page, "cprofile-table-significant", "#table")

    # Flame graph: hover shows both sides and the change, equal to the table's inclusive times.
    svg = page.locator("#flame-svg")
    frames = page.locator("#flame-svg rect[data-index]")
    data = result.report().data["flame"]
    backward = data["name"].index(next(r["function"] for r in rows if r["function_name"] == "backward"))
    row = next(r for r in rows if r["function_name"] == "backward")
    page.locator(f"#flame-svg rect[data-index='{backward}']").hover()
    tip = page.locator("#tip").inner_text()
    unit = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}  # the tip writes durations as proflake.numbers does

    def duration(side: str) -> float:
        number, scale = re.search(side + r": ([\d.,]+) (s|ms|µs|ns)/", tip).groups()
        return float(number.replace(",", "")) * unit[scale]

    base, head = duration("base"), duration("head")  # three significant digits
    assert math.isclose(base, row["base_cum"], rel_tol=5e-3) and math.isclose(head, row["head_cum"], rel_tol=5e-3), tip
    assert "change: +" in tip
    # ... growth is red, and colouring by own time keeps it red
    r, _, b = rgb(page.locator(f"#flame-svg rect[data-index='{backward}']").get_attribute("fill"))
    assert r > b
    page.select_option("#flame-colour", "own")
    r, _, b = rgb(page.locator(f"#flame-svg rect[data-index='{backward}']").get_attribute("fill"))
    assert r > b
    # Search highlights and sums both sides; zoom narrows and reset restores.
    shown_all = int(svg.get_attribute("data-shown"))
    page.fill("#flame-search", "backward")
    assert int(svg.get_attribute("data-matches")) >= 1
    assert "matched: base" in page.locator("#flame-status").inner_text()
    shoot(page, "cprofile-flame-search", "#flame")
    page.fill("#flame-search", "")
    target = frames.nth(2)
    index = target.get_attribute("data-index")
    target.click()
    assert svg.get_attribute("data-zoom") == index and int(svg.get_attribute("data-shown")) < shown_all
    page.click("#flame-reset")
    assert svg.get_attribute("data-zoom") == "0" and int(svg.get_attribute("data-shown")) == shown_all

    assert view.errors == []
    assert view.outside() == []


def test_pyinstrument_diff_page_renders(browser, pyinstrument_store, tmp_path):  # noqa: F811
    result = Profiles(pyinstrument_store).diff("a", "b")
    path = result.report().write(tmp_path / "pyinstrument.html")
    view = Page(browser, path.as_uri())
    view.page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert "merged exactly" in view.page.locator("#flame-kind").inner_text()
    # the removed function's frame is blue, the slower one red
    flame = result.report().data["flame"]
    gone = next(i for i, n in enumerate(flame["name"]) if n.endswith("(checkpoint)"))
    r, _, b = rgb(view.page.locator(f"#flame-svg rect[data-index='{gone}']").get_attribute("fill"))
    assert b > r
    shoot(view.page, "pyinstrument-flame", "#flame")
    assert view.errors == [] and view.outside() == []
