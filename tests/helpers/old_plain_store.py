"""The checked-in store of plain files written by the release before the plain layout (tests/data/stores/plain-v1/).

Until c1d8011, ``proflake ingest FILE --job J --node N`` listed a plain file under a made-up smdebug path
(framework ``plain``, layout ``smdebug``); this store holds two such files, so tests can check that those
rows read as they were written, next to files ingested since. ``build`` was run ONCE, with proflake at
commit c1d8011 (its tree from ``git archive c1d8011 etl queries schemas``), as

    PYTHONPATH=/tmp/old-release/etl .venv/bin/python tests/helpers/old_plain_store.py tests/data/stores/plain-v1

It copies tests/data/format-samples' cProfile and pyinstrument files to SOURCE_ROOT (fixed bytes, a fixed
modification time) and ingests them as job ``laptop``, node ``n``, steps 0 of train.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

SOURCE_ROOT = Path("/tmp/proflake-plain-v1-source")
SAMPLES = Path(__file__).resolve().parent.parent / "data" / "format-samples"
FILES = {"run.prof": "cprofile-py3.13.pstats", "run.json": "pyinstrument-5.1.3.json"}
MTIME_NS = 1_700_000_000_250_000_000


def build(store: str) -> None:
    from proflake.cli import cli

    shutil.rmtree(SOURCE_ROOT, ignore_errors=True)
    SOURCE_ROOT.mkdir(parents=True)
    for name, sample in FILES.items():
        shutil.copyfile(SAMPLES / sample, SOURCE_ROOT / name)
        os.utime(SOURCE_ROOT / name, ns=(MTIME_NS, MTIME_NS))
    cli(["ingest", str(SOURCE_ROOT), "--job", "laptop", "--node", "n", "--store", store], standalone_mode=False)


if __name__ == "__main__":
    build(sys.argv[1])
