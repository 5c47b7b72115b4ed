"""The registry of what ``python -m bench.lab.run`` measures: its sections, in the order they run, each with
the targets it is judged by and how it is printed.

A new case plugs in with one ``Section`` appended to ``SECTIONS`` (bench/README.md, "Adding a case"):
``run(ctx)`` adds its figures to ``ctx.data[key]``; ``targets(data)`` and ``render(data)`` read them
back from the JSON alone, so ``--render`` can print an earlier run. ``default=False`` sections run only
when named with ``--with NAME``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.lab import report, targets
from bench.lab.cases import Context
from bench.lab.cases.fetch import run_fetches
from bench.lab.cases.ingest import run_floors, run_ingests, run_readers, run_store
from bench.lab.cases.single_step import run_single_step
from bench.lab.cases.trend import render_trend, run_trend, trend_targets


@dataclass(frozen=True)
class Section:
    name: str  # for --with and the log
    run: Callable[[Context], None]
    key: str  # the key of ctx.data it fills: its presence in a JSON means the section ran
    targets: Callable[[dict], list[dict]] | None = None
    render: Callable[[dict], list[str]] | None = None
    default: bool = True  # False: runs only with --with NAME


SECTIONS: list[Section] = [
    Section("floors", run_floors, "floor"),
    # The ingest table also shows the floors and the parse pass (readers), measured around it.
    Section("ingest", run_ingests, "ingest", targets.ingest_targets, report.render_ingest),
    Section("readers", run_readers, "readers"),
    Section("store", run_store, "store", targets.store_targets, report.render_store),
    Section("fetch", run_fetches, "fetch", targets.fetch_targets, report.render_fetch),
    Section(
        "single_step", run_single_step, "single_step", targets.single_step_targets, report.render_single_step
    ),
    # Its own corpus (a series of jobs), not the run's: --trend-jobs N, 0 to leave it out.
    Section("trend", run_trend, "trend", trend_targets, render_trend),
]


def chosen(extra: list[str] | None = None) -> list[Section]:
    """The default sections and the optional ones named in ``extra``, in registry order."""
    names = {s.name for s in SECTIONS}
    unknown = sorted(set(extra or []) - names)
    if unknown:
        raise ValueError(
            f"no benchmark section named {', '.join(unknown)}; known: {', '.join(sorted(names))}"
        )
    return [s for s in SECTIONS if s.default or s.name in (extra or [])]


def evaluate_targets(data: dict) -> list[dict]:
    """Every target of every section the JSON holds, judged from the JSON alone."""
    return [t for s in SECTIONS if s.targets and s.key in data for t in s.targets(data)]


def render_markdown(data: dict) -> str:
    """The run's markdown: the header, each section present in the JSON, the targets (``data["targets"]``)."""
    lines = report.render_header(data)
    for section in SECTIONS:
        if section.render and section.key in data:
            lines += section.render(data)
    lines += report.render_targets(data["targets"])
    return "\n".join(lines)
