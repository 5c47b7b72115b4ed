"""Run ``proflake ingest SOURCE --store STORE --json`` with one folder deleted while the source is walked:
the folder named by PROFLAKE_TEST_VANISH is removed the moment the walk is about to list it."""

from __future__ import annotations

import os
import shutil
import sys

from proflake.sources.local import LocalSource

target = os.environ.get("PROFLAKE_TEST_VANISH")
if target:
    original = LocalSource._files_of

    def vanishing(self, folder, parts):
        if folder == target:
            shutil.rmtree(folder)
        return (yield from original(self, folder, parts))

    LocalSource._files_of = vanishing

from proflake.cli import main  # noqa: E402 - imported after the patch above

sys.argv = ["proflake", "ingest", sys.argv[1], "--store", sys.argv[2], "--json"]
main()
