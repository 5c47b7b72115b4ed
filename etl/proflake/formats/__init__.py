"""The input formats proflake reads, keyed by the shape of their data (docs/formats.md).

Three shapes, two places in the store:

* ``caller_graph``: functions with their callers (cProfile/pstats dumps, yappi's pstats output) land in
  function_stats and function_callers, filed under profiler ``cprofile``;
* ``call_tree``: a tree of frames with inclusive and self time (pyinstrument JSON and sessions,
  speedscope evented profiles) lands in pyinstrument_frames, filed under profiler ``pyinstrument``;
* ``sampled_stacks``: stacks with a weight each (speedscope sampled profiles, flamegraph.pl collapsed
  stacks, py-spy ``--format raw``, austin) become a call tree (each stack adds its weight to every frame
  on its path, its leaf's self time) and land where call trees do.

So every fetch method, the report, diff, exports and trend read every format through the two table
families; code that must tell them apart asks :func:`is_caller_graph` or :func:`tables_of`, never a
format's name. Adding a format is one reader module (``read`` names its function, imported only where a
file is parsed), one :data:`FORMATS` line and a test. This module imports nothing heavy: the CLI builds
its options from it, the plain-files source detects formats with it (proflake.formats.sniff).
"""

from __future__ import annotations

from dataclasses import dataclass

from proflake.errors import UnknownNameError

CALLER_GRAPH = "caller_graph"
CALL_TREE = "call_tree"
SAMPLED_STACKS = "sampled_stacks"


@dataclass(frozen=True)
class Family:
    """Where a shape's rows go: the intervals' ``profiler`` value and its fact tables."""

    profiler: str
    tables: tuple[str, ...]
    counts_calls: bool  # the rows count calls (total_calls, callers), not only time


CPROFILE = Family("cprofile", ("function_stats", "function_callers"), counts_calls=True)
PYINSTRUMENT = Family("pyinstrument", ("pyinstrument_frames",), counts_calls=False)
FAMILIES = {f.profiler: f for f in (CPROFILE, PYINSTRUMENT)}
SHAPES = {CALLER_GRAPH: CPROFILE, CALL_TREE: PYINSTRUMENT, SAMPLED_STACKS: PYINSTRUMENT}
PROFILERS = tuple(FAMILIES)  # what --profiler accepts: the table families
DEFAULT_PROFILER = CPROFILE.profiler  # a fetch's profiler when the store holds both


@dataclass(frozen=True)
class Format:
    """One input format: its name (``--format``), shape, reader and how its files are recognised."""

    name: str
    shape: str
    read: str  # "module:function" taking (data, sample_rate_hz) -> proflake.readers.parse.ParsedStats
    suffixes: tuple[str, ...]  # file names ending so are this format unless their contents say otherwise
    summary: str  # one line for the docs and errors
    default_rate_hz: float | None = None  # samples per second when the file does not say (py-spy: 100)

    @property
    def family(self) -> Family:
        return SHAPES[self.shape]

    @property
    def profiler(self) -> str:
        return self.family.profiler


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("cprofile", CALLER_GRAPH, "proflake.readers.parse:read_cprofile_stats", (".prof", ".pstats", ".cprof"),
           "a cProfile/pstats dump (python -m cProfile -o, pstats.Stats.dump_stats, yappi's save(type='pstat'))"),
    Format("pyinstrument", CALL_TREE, "proflake.readers.parse:read_pyinstrument_json", (".json",),
           "pyinstrument's JSON renderer output (smdebug's python_stats.json)"),
    Format("pyinstrument-session", CALL_TREE, "proflake.readers.pyisession:read_pyisession", (".pyisession",),
           "a saved pyinstrument session (Session.save, pyinstrument -o x.pyisession)"),
    Format("speedscope", SAMPLED_STACKS, "proflake.readers.speedscope:read_speedscope", (".speedscope.json", ".speedscope"),
           "a speedscope file: sampled profiles (py-spy --format speedscope) or evented ones"),
    Format("pyspy-raw", SAMPLED_STACKS, "proflake.readers.collapsed:read_pyspy_raw", (),
           "py-spy record --format raw: collapsed stacks of 'name (file:line)' frames, a sample count each",
           default_rate_hz=100.0),
    Format("austin", SAMPLED_STACKS, "proflake.readers.collapsed:read_austin", (".austin",),
           "austin's collapsed output: P<pid>;T<tid>;file:function:line frames, microseconds each"),
    Format("collapsed", SAMPLED_STACKS, "proflake.readers.collapsed:read_collapsed", (".collapsed", ".folded"),
           "flamegraph.pl's collapsed stacks: 'a;b;c 123', a sample count each"),
)}


def format_named(name: str) -> Format:
    """The format called ``name``; UnknownNameError naming the valid ones otherwise."""
    found = FORMATS.get(name.strip().lower())
    if found is None:
        raise UnknownNameError("format", name, FORMATS)
    return found


def family(profiler: str) -> Family:
    """The table family an intervals row's ``profiler`` names."""
    found = FAMILIES.get(profiler)
    if found is None:
        raise UnknownNameError("profiler", profiler, FAMILIES)
    return found


def is_caller_graph(profiler: str | None) -> bool:
    """Whether rows filed under ``profiler`` are a caller graph (calls and callers), not a call tree."""
    return (profiler or DEFAULT_PROFILER) == CPROFILE.profiler


def tables_of(profiler: str) -> tuple[str, ...]:
    return family(profiler).tables


def by_suffix(file_name: str) -> Format | None:
    """The format a file's name says, longest suffix first (``x.speedscope.json`` is speedscope)."""
    lower = file_name.lower()
    matches = [(len(s), f) for f in FORMATS.values() for s in f.suffixes if lower.endswith(s)]
    return max(matches, key=lambda m: m[0])[1] if matches else None


# A task's format for the parse workers: the name, and "@HZ" when a sample rate was given for it.
def task_format(name: str, sample_rate_hz: float | None = None) -> str:
    return name if sample_rate_hz is None else f"{name}@{sample_rate_hz!r}"


def parse_task_format(text: str) -> tuple[Format, float | None]:
    name, _, rate = text.partition("@")
    return format_named(name), float(rate) if rate else None
