"""Ingest the same corpus with two checkouts of proflake, alternating, in one run: their ratio is what a
change bought, with the host's drift shared by both sides (bench.lab.run's ratios are against floors).

    python -m bench.lab.ab --corpus /tmp/pb/corpus-10k --before /tmp/old-checkout --rounds 3 --workers 1 2

``--before`` and ``--after`` (default: this checkout) are folders holding ``etl/proflake/``; each side runs in a
fresh interpreter with that folder first on its path, into a fresh store, and only ``ingest()`` is timed.
A side whose compiled decoder is not built beside its source parses in Python: build it first
(``pip install -e`` in that checkout, or copy the module).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1] + "/etl")
from proflake.ingestion.batch import ingest
started = time.perf_counter()
ingest(sys.argv[2], sys.argv[3], workers=int(sys.argv[4]), log=lambda message: None)
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def time_ingest(checkout: Path, job_dir: str, workers: int) -> float:
    store = tempfile.mkdtemp(prefix="proflake-ab-")
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(checkout / "etl"), str(checkout), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-c", CHILD, str(checkout), job_dir, store, str(workers)],
                              capture_output=True, text=True, env=env, cwd=checkout)
        if done.returncode != 0:
            raise SystemExit(f"ingest with {checkout} failed: {done.stderr.strip().splitlines()[-1:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a corpus written by bench.corpus")
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument("--after", type=Path, default=REPO, help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    for side in (args.before, args.after):
        if not (side / "etl" / "proflake").is_dir():
            parser.error(f"{side} holds no etl/proflake/ folder; pass a proflake checkout")
    manifest = args.corpus / "corpus.json"
    if not manifest.is_file():
        parser.error(f"{args.corpus} holds no corpus.json; pass a corpus written by bench.corpus")
    job_dir = json.loads(manifest.read_text())["job_dir"]
    for workers in args.workers:
        seconds: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for name, side in (("before", args.before), ("after", args.after)):
                seconds[name].append(time_ingest(side, job_dir, workers))
        before, after = statistics.median(seconds["before"]), statistics.median(seconds["after"])
        print(f"{workers} worker(s): before {before:.2f} s, after {after:.2f} s (medians of {args.rounds}; "
              f"all: {seconds}) = {after / before:.2f}x")


if __name__ == "__main__":
    main()
