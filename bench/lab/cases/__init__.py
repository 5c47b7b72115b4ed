"""What the benchmark measures, one module per family; each section is a function ``run(ctx)`` that adds
its figures to ``ctx.data`` (the run's JSON). ``bench.lab.sections`` lists them in the order they run.

    ingest.py        the decode and Parquet floors, full and incremental ingests, the parse pass, store bytes
    fetch.py         every fetch method through the native API, the compatible API, the CLI and smdebug
    answers.py       whether those answers agree with smdebug's
    single_step.py   one step, four calls alternated round by round
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.lab.harness import wait_for_quiet


@dataclass
class Context:
    """What every section of a run shares: the options, the corpus, the stores, the results so far."""

    args: argparse.Namespace
    manifest: dict  # the corpus's corpus.json (bench.corpus)
    corpus_dir: Path
    data: dict[str, Any]  # the run's JSON, filled section by section
    log: Callable[[str], None]
    cprofile_paths: list[str] = field(default_factory=list)
    pyinstrument_paths: list[str] = field(default_factory=list)

    @property
    def stores(self) -> Path:
        """Where the ingest sections write their stores."""
        return self.corpus_dir / "stores"

    @property
    def main_store(self) -> Path:
        """The 1-worker store the later sections read (store bytes, fetches)."""
        return self.stores / "store-1w"

    def wait_quiet(self) -> None:
        """Before a measurement: wait up to --wait-quiet seconds for the rest of the machine to go idle."""
        wait_for_quiet(self.args.wait_quiet, self.log)
