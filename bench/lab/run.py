"""The one benchmark command: a corpus, then the floors, ingest, store size and every fetch method,
measured side by side in one run and judged as ratios (bench/README.md says what each figure means).

    python -m bench.lab.run --files 2000                  # generate a corpus, measure, print, write JSON
    python -m bench.lab.run --corpus /tmp/proflake-bench/corpus-2000-4n-s0    # reuse a corpus
    python -m bench.lab.run --render RESULT.json          # print an earlier run's tables

This module parses the options and runs the sections of ``bench.lab.sections`` in order; the machinery is
in ``bench.lab.harness``, what is measured in ``bench.lab.cases``, the goals in ``bench.lab.targets``, the tables in
``bench.lab.report``. Prints markdown and writes everything as JSON (``--json-out``, default
``bench/results/<UTC timestamp>.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python bench/lab/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import baseline as bl  # noqa: E402
from bench import corpus as corpus_mod  # noqa: E402
from bench.lab.cases import Context  # noqa: E402
from bench.lab.cases.ingest import ingest_signature  # noqa: E402
from bench.lab.harness import (  # noqa: E402
    RESULTS_DIR,
    WARMUP_S,
    code_hash,
    cprofile_decoder,
    git_rev,
    now,
    snapshot_and_reexec,
    timestamp,
)
from bench.lab.sections import SECTIONS, chosen, evaluate_targets, render_markdown  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.lab.run", description="proflake's benchmark (see bench/README.md)"
    )
    src = parser.add_argument_group("corpus")
    src.add_argument("--files", type=int, default=2000, help="cProfile files to generate (default 2000)")
    src.add_argument("--nodes", type=int, default=4)
    src.add_argument("--pyinstrument-fraction", type=float, default=0.1)
    src.add_argument("--seed", type=int, default=0)
    src.add_argument("--templates", type=Path, help="reuse template profiles (a corpus's templates/ folder)")
    src.add_argument(
        "--out",
        type=Path,
        help="where to generate the corpus (default: $TMPDIR/proflake-bench/corpus-FILES-NODESn-sSEED)",
    )
    src.add_argument(
        "--corpus", type=Path, help="reuse a corpus written by bench.corpus instead of generating one"
    )
    m = parser.add_argument_group("measurement")
    m.add_argument(
        "--repeats", type=int, default=7, help="runs per native/compat latency (median; default 7)"
    )
    m.add_argument("--cli-repeats", type=int, default=3, help="runs per CLI latency (default 3)")
    m.add_argument("--baseline-repeats", type=int, default=3, help="runs per baseline latency (default 3)")
    m.add_argument(
        "--warmup",
        type=float,
        default=WARMUP_S,
        metavar="SECONDS",
        help=f"untimed calls before each warm cell and the alternation, for this long (default {WARMUP_S})",
    )
    m.add_argument(
        "--alternations",
        type=int,
        default=41,
        help="rounds of the single-step comparison, compat / native / smdebug cached / SQL floor called in "
        "turn (default 41)",
    )
    m.add_argument(
        "--baseline-budget",
        type=float,
        default=60.0,
        help="stop repeating a baseline cell after this many seconds (default 60)",
    )
    m.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="ingest worker counts to measure (default 1 2)"
    )
    m.add_argument(
        "--ingest-passes",
        type=int,
        default=2,
        help="full ingests per worker count, each into a new store; the fastest is reported, as the floors' "
        "fastest passes are, and the highest peak memory of any (default 2)",
    )
    m.add_argument("--methods", nargs="+", help="only these fetch methods (default: all)")
    m.add_argument(
        "--trend-jobs",
        type=int,
        default=1000,
        help="jobs in the trend section's series (bench/lab/cases/trend.py; default 1000, 0 leaves it out)",
    )
    m.add_argument(
        "--trend-store", type=Path, help="measure trend on this store (written by python -m bench.lab.trend_bench)"
    )
    m.add_argument("--trend-repeats", type=int, default=3, help="Profiles.trend calls timed (median; default 3)")
    m.add_argument(
        "--profile-ingest",
        metavar="FILE",
        help="also run one extra, unmeasured 1-worker ingest under cProfile; write its dump to FILE",
    )
    m.add_argument("--json-out", type=Path, help="default bench/results/<UTC timestamp>.json")
    m.add_argument(
        "--snapshot",
        action="store_true",
        help="measure a copy of the checkout taken now (others may be editing proflake/ while this runs)",
    )
    m.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each measurement, wait up to SECONDS for other processes to use < 0.25 cores (default "
        "0: don't wait)",
    )
    m.add_argument(
        "--render", type=Path, metavar="JSON", help="only print the tables of an earlier run's JSON"
    )
    m.add_argument(
        "--keep-stores", action="store_true", help="keep the stores (default: keep only the 1-worker store)"
    )
    m.add_argument(
        "--with",
        dest="extra_sections",
        nargs="+",
        default=[],
        metavar="SECTION",
        help="also run these optional sections (bench/lab/sections.py: "
        + (", ".join(s.name for s in SECTIONS if not s.default) or "none yet")
        + ")",
    )
    args = parser.parse_args(argv)
    if args.ingest_passes < 1:
        parser.error(f"--ingest-passes must be at least 1, not {args.ingest_passes}")
    if args.trend_jobs < 0 or args.trend_repeats < 1:
        parser.error("--trend-jobs must be 0 or more and --trend-repeats at least 1")
    if args.alternations < 1:
        parser.error(f"--alternations must be at least 1, not {args.alternations}")
    if not (math.isfinite(args.warmup) and args.warmup >= 0):
        parser.error(f"--warmup must be a number of seconds, 0 or more, not {args.warmup}")
    try:
        args.sections = chosen(args.extra_sections)
    except ValueError as e:
        parser.error(str(e))
    return args


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text())
        data["targets"] = evaluate_targets(data)
        print(render_markdown(data))
        return 0
    command = list(argv if argv is not None else sys.argv[1:])
    if args.snapshot:
        snapshot_and_reexec(command, None)

    started = time.perf_counter()
    if args.corpus:
        manifest = corpus_mod.load_manifest(args.corpus)
        corpus_dir = args.corpus.absolute()
        log(f"reusing corpus {corpus_dir} ({manifest['cprofile_files']} cProfile files)")
    else:
        corpus_dir = (
            args.out
            or Path(tempfile.gettempdir())
            / "proflake-bench"
            / f"corpus-{args.files}-{args.nodes}n-s{args.seed}"
        ).absolute()
        manifest = corpus_mod.generate(
            corpus_dir,
            files=args.files,
            nodes=args.nodes,
            pyinstrument_fraction=args.pyinstrument_fraction,
            seed=args.seed,
            templates=args.templates,
            force=True,
            log=log,
        )

    data: dict[str, Any] = {
        "meta": {
            "date": now(),
            "command": "python -m bench.lab.run " + " ".join(command),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "git": git_rev(),
            "code_hash": code_hash(),
            "snapshot": os.environ.get("PROFLAKE_BENCH_SNAPSHOT"),
            "ingest_signature": ingest_signature(),
            "cprofile_decoder": cprofile_decoder(),
            "corpus_dir": str(corpus_dir),
            "repeats": {
                "native_compat": args.repeats,
                "cli": args.cli_repeats,
                "baseline": args.baseline_repeats,
            },
        },
        "corpus": {k: v for k, v in manifest.items() if k != "nodes"},
    }
    cprofile_paths, pyinstrument_paths = bl.stats_files(manifest["job_dir"])
    ctx = Context(args, manifest, corpus_dir, data, log, cprofile_paths, pyinstrument_paths)
    for section in args.sections:
        section.run(ctx)
    data["targets"] = evaluate_targets(data)
    data["meta"]["seconds"] = round(time.perf_counter() - started, 1)

    if not args.keep_stores and ctx.stores.exists():
        for child in ctx.stores.iterdir():
            if child != ctx.main_store:
                shutil.rmtree(child, ignore_errors=True)

    out = args.json_out or RESULTS_DIR / f"{timestamp()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(data)
    data["markdown"] = markdown
    out.write_text(json.dumps(data, indent=1, default=str))
    print(markdown)
    log(f"wrote {out} ({data['meta']['seconds']} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
