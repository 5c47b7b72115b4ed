"""A store built once per module and handed to each test as a fresh copy, at the same path.

A store records the absolute paths of its sources (``intervals.source_uri``), so a copy elsewhere would
point at the original's sources. Each test therefore gets the copy at one fixed folder of its xdist
worker (tests of a module run one after another on one worker): the previous test's folder is deleted
and the template copied back, mtimes and all (a local file's version is its mtime), so the sources,
the store and every recorded path are exactly what a fresh ingest left. Copying costs ~10 ms where
building the corpus and ingesting it twice cost ~0.8 s of CPU.

A test that fails leaves its folder for the next test of the module to replace: re-run it alone to
look at what it left.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path


class PreparedFolder:
    """``build(folder)`` once; then ``fresh()``: the folder, exactly as ``build`` left it."""

    def __init__(self, base: Path, build: Callable[[Path], object]) -> None:
        self.folder = base / "prepared"
        self._template = base / "template"
        self.built = build(self.folder)  # whatever build returns (e.g. the clean store's snapshot)
        shutil.copytree(self.folder, self._template, symlinks=True)

    def fresh(self) -> Path:
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.copytree(self._template, self.folder, symlinks=True)
        return self.folder
