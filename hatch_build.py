"""Compile etl/proflake/readers/_pstats_columns.c, the cProfile decoder ingest parses with, into the build.

A wheel carries the compiled module; an editable install builds it beside its source, where the
checkout's proflake/ is imported from. setuptools does the compiling because it knows each platform's
compiler and flags. Without a working C compiler the build goes on without the module (with a
warning): proflake then parses with its Python paths, ~2.4x slower per cProfile file, same rows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "proflake.readers._pstats_columns"
SOURCE = "etl/proflake/readers/_pstats_columns.c"


class CompiledDecoderHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        built = self._compile()
        if built is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # ignored by git, so it must be added by name
            build_data["force_include"][str(built)] = built.relative_to(Path(self.root, "etl")).as_posix()

    def _compile(self) -> Path | None:
        from setuptools import Distribution, Extension

        distribution = Distribution({"name": "proflake", "package_dir": {"": "etl"},
                                     "ext_modules": [Extension(MODULE, [SOURCE])]})
        command = distribution.get_command_obj("build_ext")
        command.inplace = True
        here = os.getcwd()
        os.chdir(self.root)
        try:
            command.ensure_finalized()
            command.run()
            return Path(self.root, command.get_ext_fullpath(MODULE))
        except Exception as e:  # noqa: BLE001 - any failure to compile leaves the Python paths
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            reason = reason if len(reason) <= 200 else reason[:197] + "..."
            print(f"proflake: could not compile {SOURCE} ({reason}); cProfile files will be parsed "
                  "in Python, about 2.4x slower. Install a C compiler and the Python headers, "
                  "then reinstall, to use it.", file=sys.stderr)
            return None
        finally:
            os.chdir(here)
