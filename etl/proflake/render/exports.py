"""Flame-graph exports of a selection for the tools people already use, one small renderer per format.

    speedscope  speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
                "sampled" profile whose samples are the call stacks and whose weights are their own seconds
                (sample counts, unit none, for sampled files ingested without a rate: docs/formats.md)
    collapsed   Brendan Gregg's collapsed stacks (``a;b;c 1234`` a line) for flamegraph.pl, inferno and
                Pyroscope; the counts are own microseconds (own samples for files of unknown rate)
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
from proflake.formats import is_caller_graph
from proflake.render.stacks import stacks
from proflake.render.titles import title

if TYPE_CHECKING:
    from proflake.query.page_data import ExportInputs, StackData

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


class Renderer:
    """Turns what the query layer read for one selection (proflake.query.page_data.ExportInputs) into the bytes
    of one file; ``needs`` says what it reads: the selection's ``stacks`` or its pstats ``stats``."""

    name: ClassVar[str]
    output_file_extension: ClassVar[str]
    output_is_binary: ClassVar[bool] = False
    needs: ClassVar[str] = "stacks"

    def check(self, profiler: str, group_by: tuple[str, ...]) -> None:
        """Refuse a selection this format cannot hold (before anything is read for it)."""

    def render(self, data: ExportInputs) -> bytes:
        raise NotImplementedError


class SpeedscopeRenderer(Renderer):
    name = "speedscope"
    output_file_extension = "speedscope.json"

    def render(self, data: ExportInputs) -> bytes:
        keys, names, samples = stacks(_stacks(data))
        # A frame's name is its function's name, with its file and line beside (speedscope shows them on hover);
        # built-ins (file "~") keep pstats' full name.
        frames = [
            {"name": key[2], "file": key[0], "line": key[1]} if key[0] and key[0] != "~" else {"name": name}
            for key, name in zip(keys, names)
        ]
        total = sum(weight for _, weight in samples)
        label = _title(data)
        document = {
            "$schema": SPEEDSCOPE_SCHEMA,
            "shared": {"frames": frames},
            "profiles": [
                {
                    "type": "sampled",
                    "name": label,
                    "unit": "none" if data.time_unit == "samples" else "seconds",
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

    def render(self, data: ExportInputs) -> bytes:
        _, names, samples = stacks(_stacks(data))
        # flamegraph.pl splits a line at its last space and its frames at ';': neither may appear in a name.
        clean = [n.replace(";", ",").replace(" ", "_").replace("\n", "_") for n in names]
        merged: dict[str, int] = {}
        per_unit = 1 if data.time_unit == "samples" else 1e6  # sample counts stay counts; seconds become us
        for path, seconds in samples:
            line = ";".join(clean[i] for i in path)
            merged[line] = merged.get(line, 0) + round(seconds * per_unit)
        out = io.StringIO()
        for line, micros in merged.items():
            if micros > 0:
                out.write(f"{line} {micros}\n")
        return out.getvalue().encode()


class PstatsRenderer(Renderer):
    name = "prof"
    output_file_extension = "prof"
    output_is_binary = True
    needs = "stats"

    def check(self, profiler: str, group_by: tuple[str, ...]) -> None:
        if not is_caller_graph(profiler):
            raise UsageError(f"a .prof file holds cProfile data; this result is {profiler} (try --format speedscope)")
        if group_by:
            raise UsageError("a .prof file holds one aggregate; export a selection that does not group (no --per-node)")

    def render(self, data: ExportInputs) -> bytes:
        self.check(data.profiler, data.group_by)
        if data.stats is None:
            raise ValueError("these ExportInputs hold no pstats.Stats (export_inputs(result, stats=True))")
        fd, path = tempfile.mkstemp(suffix=".prof")
        os.close(fd)
        try:
            data.stats.dump_stats(path)
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


def _stacks(data: ExportInputs) -> StackData:
    if data.stacks is None:
        raise ValueError("these ExportInputs hold no stacks (export_inputs(result, stacks=True))")
    return data.stacks


def _title(data: ExportInputs) -> str:
    name = title(data.jobs, data.node, data.method, data.arguments)
    return f"{name} ({data.profiler}, {data.intervals:,} intervals)"
