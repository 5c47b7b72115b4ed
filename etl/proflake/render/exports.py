"""Flame-graph exports of a fetch result for the tools people already use, one small renderer per format.

    speedscope  speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
                "sampled" profile whose samples are the call stacks and whose weights are their own seconds
    collapsed   Brendan Gregg's collapsed stacks (``a;b;c 1234`` a line) for flamegraph.pl, inferno and
                Pyroscope; the counts are own microseconds
    prof        a pstats file (``pstats.Stats(path)``, snakeviz, tuna); cProfile results only

Stacks come from ``proflake.render.stacks``, the report's and the diff page's tree: exact for pyinstrument;
for cProfile derived from the caller edges, rooted at the functions nothing called, recursion folded.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from typing import TYPE_CHECKING, ClassVar

from proflake.errors import UnknownNameError, UsageError
from proflake.render.stacks import stacks
from proflake.render.titles import result_title

if TYPE_CHECKING:
    from proflake.query.profiles import FetchResult

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


class Renderer:
    """Turns one fetch result into the bytes of one file."""

    name: ClassVar[str]
    output_file_extension: ClassVar[str]
    output_is_binary: ClassVar[bool] = False

    def render(self, result: FetchResult) -> bytes:
        raise NotImplementedError


class SpeedscopeRenderer(Renderer):
    name = "speedscope"
    output_file_extension = "speedscope.json"

    def render(self, result: FetchResult) -> bytes:
        keys, names, samples = stacks(result)
        # A frame's name is its function's name, with its file and line beside (speedscope shows them on hover);
        # built-ins (file "~") keep pstats' full name.
        frames = [
            {"name": key[2], "file": key[0], "line": key[1]} if key[0] and key[0] != "~" else {"name": name}
            for key, name in zip(keys, names)
        ]
        total = sum(weight for _, weight in samples)
        label = _title(result)
        document = {
            "$schema": SPEEDSCOPE_SCHEMA,
            "shared": {"frames": frames},
            "profiles": [
                {
                    "type": "sampled",
                    "name": label,
                    "unit": "seconds",
                    "startValue": 0,
                    "endValue": total,
                    "samples": [list(path) for path, _ in samples],
                    "weights": [weight for _, weight in samples],
                }
            ],
            "name": label,
            "activeProfileIndex": 0,
            "exporter": "proflake",
        }
        return json.dumps(document, allow_nan=False).encode()


class CollapsedRenderer(Renderer):
    name = "collapsed"
    output_file_extension = "collapsed.txt"

    def render(self, result: FetchResult) -> bytes:
        _, names, samples = stacks(result)
        # flamegraph.pl splits a line at its last space and its frames at ';': neither may appear in a name.
        clean = [n.replace(";", ",").replace(" ", "_").replace("\n", "_") for n in names]
        merged: dict[str, int] = {}
        for path, seconds in samples:
            line = ";".join(clean[i] for i in path)
            merged[line] = merged.get(line, 0) + round(seconds * 1e6)
        out = io.StringIO()
        for line, micros in merged.items():
            if micros > 0:
                out.write(f"{line} {micros}\n")
        return out.getvalue().encode()


class PstatsRenderer(Renderer):
    name = "prof"
    output_file_extension = "prof"
    output_is_binary = True

    def render(self, result: FetchResult) -> bytes:
        if result.profiler != "cprofile":
            raise UsageError("a .prof file holds cProfile data; this result is pyinstrument (try --format speedscope)")
        if result.group_by:
            raise UsageError("a .prof file holds one aggregate; export a selection that does not group (no --per-node)")
        fd, path = tempfile.mkstemp(suffix=".prof")
        os.close(fd)
        try:
            result.write_prof(path)
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.unlink(path)


RENDERERS: dict[str, type[Renderer]] = {r.name: r for r in (SpeedscopeRenderer, CollapsedRenderer, PstatsRenderer)}
EXPORT_FORMATS = tuple(RENDERERS)


def renderer(name: str) -> Renderer:
    if name not in RENDERERS:
        raise UnknownNameError("export format", name, EXPORT_FORMATS)
    return RENDERERS[name]()


def _title(result: FetchResult) -> str:
    return f"{result_title(result)} ({result.profiler}, {result.intervals.num_rows:,} intervals)"
