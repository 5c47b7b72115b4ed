"""Screenshots of the pages for docs/: the report (docs/report.png, its flame graph docs/report-flame.png)
and the diff page (docs/diff.png) of a bench corpus's job, drawn by chromium (playwright, as the browser
tests) at a 1,400 px wide viewport, each page whole.

    python -m bench.corpus --files 10000 --out /tmp/corpus-10k
    proflake ingest /tmp/corpus-10k --store /tmp/store-10k
    python -m bench.lab.screenshots --store /tmp/store-10k --out docs

The report is of the whole job (``proflake report job``); the diff compares the first ``--steps`` train
steps with the next as many, on every node (``proflake diff JOB --base-steps 0:N-1 --head-steps N:2N-1``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from proflake.query.profiles import Profiles

from bench.corpus import JOB_NAME

CHROMIUM = "/usr/bin/chromium"
WIDTH = 1400


def pages(store: str, job: str, steps: int, folder: Path) -> dict[str, Path]:
    """The report and the diff page of ``job``, written under ``folder``."""
    profiles = Profiles(store)
    report = profiles.fetch("by_job_phase", job=job).report().write(folder / "report.html")
    diff = profiles.diff({"job": job, "start_step": 0, "end_step": steps - 1},
                         {"job": job, "start_step": steps, "end_step": 2 * steps - 1})
    return {"report": report, "diff": diff.report().write(folder / "diff.html")}


def shoot(written: dict[str, Path], out: Path) -> list[Path]:
    from playwright import sync_api

    shots = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        for name, path in written.items():
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            shots.append(out / f"{name}.png")
            page.screenshot(path=str(shots[-1]), full_page=True)
            if name == "report":
                shots.append(out / "report-flame.png")
                page.locator("#flame").screenshot(path=str(shots[-1]))
            page.close()
        browser.close()
    return shots


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.screenshots", description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a store holding a bench corpus")
    parser.add_argument("--job", default=JOB_NAME, help=f"the job (default {JOB_NAME}, a bench corpus's)")
    parser.add_argument("--steps", type=int, default=1000, help="train steps per side of the diff (default 1000)")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where the PNG files go (default docs)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for shot in shoot(pages(args.store, args.job, args.steps, Path(folder)), args.out):
            print(f"wrote {shot}")


if __name__ == "__main__":
    main()
