"""``python -m bench [--corpus PATH] [--files N] [--repeats R] [--json-out FILE]``: how much faster than
smdebug, on my corpus (``bench/compare.py``); without ``--corpus``, on a generated corpus of ``--files``."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench import corpus as corpus_mod
from bench.compare import CorpusError, compare, profiler_dir, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--corpus", type=Path, help="an smdebug job folder or its .../cprofile folder")
    parser.add_argument("--files", type=int, default=500, help="files of the generated corpus (default 500)")
    parser.add_argument("--repeats", type=int, default=3, help="calls of each method on each side (default 3)")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    work = Path(tempfile.gettempdir()) / "proflake-bench"
    source = args.corpus
    if source is None:
        generated = work / f"corpus-{args.files}"
        if not (generated / "corpus.json").exists():
            corpus_mod.generate(generated, files=args.files, force=True, log=lambda *a: print(*a, file=sys.stderr))
        source = generated / corpus_mod.JOB_NAME  # not its templates/, which hold profiles of their own
    try:
        with tempfile.TemporaryDirectory(prefix="store-", dir=work if work.is_dir() else None) as store:
            result = compare(profiler_dir(source.absolute()), Path(store) / "store", args.repeats)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(result))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
