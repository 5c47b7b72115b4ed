"""The run's markdown: one renderer per section, each returning lines, from the JSON alone (``--render``
prints an earlier run's). Tables are markdown pipe tables (tabulate), readable as text too."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tabulate import tabulate

from bench.lab.cases.ingest import (
    adjacent_floors,
    adjacent_parquet_floors,
    best_floor,
    best_parquet_floor,
    paired_parquet_ratios,
)
from bench.lab.targets import fmt_ms, fmt_pct, fmt_x


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> list[str]:
    """A markdown table; ``align`` has one letter per column: l(eft) or r(ight)."""
    colalign = tuple({"l": "left", "r": "right"}[a] for a in align)
    text = tabulate(
        [[str(c) for c in row] for row in rows],
        headers=list(headers),
        tablefmt="pipe",
        colalign=colalign,
        disable_numparse=True,
    )
    return text.splitlines()


def render_header(data: dict) -> list[str]:
    c, meta = data["corpus"], data["meta"]
    raw = c["raw_bytes"]
    return [
        f"Corpus: {c['cprofile_files']} cProfile files on {len(c['node_ids'])} nodes "
        f"({raw['cprofile'] / 1e6:.1f} MB), "
        f"{c['pyinstrument_intervals']} pyinstrument sessions ({raw['pyinstrument_json'] / 1e6:.1f} MB "
        "JSON); "
        f"{meta['cpu_count']} CPUs, Python {meta['python']}, proflake {meta['git']} (code "
        f"{meta['code_hash']}), {meta['date']}"
        + (f"; cProfile decoder: {meta['cprofile_decoder']}." if "cprofile_decoder" in meta else "."),
        "",
    ]


# -- the write side ---------------------------------------------------------------------------------------
def _cpu(run: dict) -> str:
    main_cpu = run.get("cpu_seconds_self")
    if main_cpu is None:
        return "n/a"
    if "live_descendants" not in run:
        return f"{main_cpu:.1f} + n/a"
    return f"{main_cpu:.1f} + {run.get('worker_cpu_seconds', 0.0):.1f}"


def _passes(run: dict) -> str:
    """How many passes an ingest row is the fastest of (older JSON: one)."""
    passes = run.get("passes_seconds")
    if not passes or len(passes) < 2:
        return ""
    return f" (fastest of {len(passes)}: " + ", ".join(f"{s:.2f}" for s in passes) + " s)"


def _load(section: dict) -> str:
    value = section.get("machine", {}).get("other_cores")
    return "n/a" if value is None else f"{value:.2f}"


def _just_before(run: dict) -> str:
    adjacent = run.get("adjacent_floor_seconds")
    text = f"{fmt_x(run['seconds'] / adjacent)} ({adjacent:.2f} s)" if adjacent else "n/a"
    paired = paired_parquet_ratios(run)
    if paired:
        floors = ", ".join(f"{f:.2f}" for f in run["adjacent_parquet_floors_seconds"])
        text += (
            f"; each pass over the Parquet-floor pass before it: {', '.join(fmt_x(r) for r in paired)} "
            f"({floors} s), median {fmt_x(statistics.median(paired))}"
        )
    return text


def render_ingest(data: dict) -> list[str]:
    """The ingest table (floors, ingests, parse pass, incremental re-run), its notes, the profiles."""
    f, ing = data["floor"], data["ingest"]
    floor_s = best_floor(data)
    n_passes = len(f.get("passes_seconds", [])) + len(adjacent_floors(data))
    rows = [
        [
            f"decode floor (read + marshal.loads/json.loads, 1 process; fastest of {n_passes or 'n'} passes)",
            f"{floor_s:.2f}",
            "1.00x",
            "-",
            "-",
            "-",
            "-",
            _load(f),
        ]
    ]
    parquet = data.get("parquet_floor")
    parquet_s = best_parquet_floor(data)
    if parquet and parquet_s:
        n_parquet = len(parquet["passes_seconds"]) + len(adjacent_parquet_floors(data))
        rows.append(
            [
                f"Parquet floor⁴ (read + proflake.readers.parse.parse_stats + write the rows with the "
                "store's "
                f"settings, 1 process; fastest of {n_parquet})",
                f"{parquet_s:.2f}",
                fmt_x(parquet_s / floor_s),
                "-",
                "-",
                "-",
                "-",
                _load(parquet),
            ]
        )
    for w in ("1", "2"):
        run = ing["runs"].get(w)
        if isinstance(run, dict) and "seconds" in run:
            rows.append(
                [
                    f"ingest, {w} worker{'s' if w != '1' else ''}{_passes(run)}",
                    f"{run['seconds']:.2f}",
                    fmt_x(run["seconds"] / floor_s),
                    _just_before(run),
                    _cpu(run),
                    f"{run['peak_rss_mb']:.0f}",
                    f"{run['peak_tree_rss_mb']:.0f} ({run['processes']} processes)",
                    _load(run),
                ]
            )
        elif run is not None:
            rows.append(
                [
                    f"ingest, {w} workers",
                    "n/a",
                    run if isinstance(run, str) else "n/a",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                ]
            )
    rd = data.get("readers", {})
    if "seconds" in rd:
        rows.append(
            [
                "parse only (read + proflake.readers.parse.parse_stats, no store, no workers; 1 process)",
                f"{rd['seconds']:.2f}",
                fmt_x(rd["seconds"] / floor_s),
                "-",
                "-",
                "-",
                "-",
                _load(rd),
            ]
        )
    inc = ing.get("incremental", {})
    if "seconds" in inc:
        rows.append(
            [
                f"incremental re-run, unchanged corpus{_passes(inc)}",
                f"{inc['seconds']:.2f}",
                f"{fmt_pct(inc['x_full'])} of full ingest",
                "-",
                _cpu(inc),
                f"{inc['peak_rss_mb']:.0f}",
                f"{inc['peak_tree_rss_mb']:.0f}",
                _load(inc),
            ]
        )
    lines = table(
        [
            "ingest",
            "seconds",
            "x decode floor",
            "x the floor passes just before it",
            "CPU s: main + workers",
            "peak memory (MB)²",
            "summed RSS of the process tree (MB)",
            "other load³",
        ],
        rows,
        "lrrrrrrr",
    )
    probes = [
        sec.get("machine", {}).get("cpu_probe_ms")
        for sec in [f, parquet or {}, rd, inc, *[r for r in ing["runs"].values() if isinstance(r, dict)]]
    ]
    probes = [p for p in probes if p is not None]
    probe_note = (
        f" A fixed CPU probe took {min(probes):.1f}-{max(probes):.1f} ms across these rows (host speed "
        "drift)."
        if probes
        else ""
    )
    lines += [
        "",
        "² max(peak RSS of the ingest's main process, peak PSS summed over its process tree: shared pages "
        "counted once). "
        "³ CPU cores kept busy by other processes on the machine during that measurement (0 = quiet machine)."
        + probe_note
        + (
            " The floor passes just before each ingest pass (a decode-floor pass, after a Parquet-floor pass)"
            " show how far the host's speed drifted: the fastest pass over its own decode-floor pass, and "
            "every"
            " pass over its own Parquet-floor pass."
            if adjacent_parquet_floors(data)
            else " The floor pass just before each ingest shows how far the host's speed drifted."
        )
        + (
            " ⁴ The least an ingest into this store does (bench/baseline.py, parquet_floor): no interval "
            "keys,"
            " listing, partial sums or commit."
            if parquet
            else ""
        ),
    ]
    prof = ing.get("profile")
    if prof:
        lines += _profile_table(
            f"Where the ingest's main process spends its time (one more 1-worker ingest under cProfile, "
            f"{prof['seconds_under_cprofile']:.1f} s; top by own time; waiting for workers shows as "
            "poll/select):",
            prof,
        )
    rprof = rd.get("profile")
    if rprof:
        lines += _profile_table(
            f"Where a parse worker's time goes (every file parsed in one process under cProfile, "
            f"{rprof['total_seconds']:.1f} s; top by own time):",
            rprof,
        )
    return lines


def _profile_table(title: str, prof: dict) -> list[str]:
    rows = [
        [
            f"`{r['function']}`",
            r["calls"],
            f"{r['tottime']:.2f}",
            f"{r['cumtime']:.2f}",
            f"{r['share'] * 100:.0f}%",
        ]
        for r in prof["by_tottime"][:10]
    ]
    return [
        "",
        title,
        "",
        *table(["function", "calls", "own s", "cumulative s", "share of own time"], rows, "lrrrr"),
    ]


def render_store(data: dict) -> list[str]:
    s = data["store"]
    return [
        "",
        f"Store: {s['bytes'] / 1e6:.2f} MB for {s['raw_bytes'] / 1e6:.1f} MB of raw stats = "
        f"{fmt_pct(s['x_raw'])} "
        f"({', '.join(f'{k} {v / 1e6:.2f} MB' for k, v in s['per_table'].items())})."
        + (
            f" Of that, the measured times alone (tottime/cumtime, pyinstrument's times; zstd, "
            "byte-stream-split) "
            f"are {s['measured_time_bytes'] / 1e6:.2f} MB = {fmt_pct(s['measured_time_x_raw'])} of raw: no "
            "layout that keeps every time exact gets below that."
            if s.get("measured_time_bytes")
            else ""
        ),
    ]


# -- the read side ----------------------------------------------------------------------------------------
def _cell_ms(cell: dict, column: str) -> str:
    v = cell[column]
    if "error" in v:
        return "n/a"
    text = fmt_ms(v.get("median_ms"))
    return text if v.get("runs", 0) > 1 or v.get("median_ms") is None else text + "¹"


def _short(verdict: str) -> str:
    if verdict.startswith("match"):
        return "yes" if verdict == "match" else "yes*"
    if verdict.startswith("mismatch"):
        return "**NO**"
    return "n/a"


def render_fetch(data: dict) -> list[str]:
    rows = []
    for method, entry in data["fetch"].items():
        for scope, cell in entry["scopes"].items():
            r, same = cell["ratios"], cell["same_answer"]
            rows.append(
                [
                    f"{method}{' (' + entry['args'] + ')' if entry['args'] else ''}",
                    scope,
                    *(
                        _cell_ms(cell, c)
                        for c in (
                            "native_warm",
                            "native_cold",
                            "compat_warm",
                            "compat_drop_in",
                            "cli",
                            "baseline",
                            "baseline_cached",
                        )
                    ),
                    fmt_x(r["baseline_over_native_warm"]),
                    fmt_x(r["baseline_over_compat_warm"]),
                    fmt_x(r["baseline_cached_over_compat_warm"]),
                    f"{_short(same['native'])} / {_short(same['compat'])}",
                ]
            )
    fm = data["meta"].get("fetch_machine", {})
    return [
        "",
        *table(
            [
                "method",
                "nodes",
                "native warm",
                "native cold",
                "compat warm",
                "compat drop-in",
                "CLI",
                "smdebug",
                "smdebug cached",
                "smdebug / native warm",
                "smdebug / compat warm",
                "smdebug cached / compat warm",
                "same answer (native / compat)",
            ],
            rows,
            "llrrrrrrrrrrl",
        ),
        "",
        f"Other processes kept {fm.get('other_cores', 'n/a')} cores busy on average while the fetches were "
        "measured "
        f"(CPU probe {fm.get('cpu_probe_ms', 'n/a')} ms at the start).",
        "",
        "¹ a single run (its repeat count, or the time budget of a slow baseline cell, allowed one); every "
        "other cell is "
        "the median of several runs (counts in the JSON).",
    ]


SINGLE_STEP_CALLS = {
    "smdebug_cached": "smdebug cached (refresh_stats=False)",
    "compat": "compatible API (refresh_stats=False), a pstats.Stats with caller edges",
    "native": "native API, `Profiles.by_step`",
    "sql_floor": "SQL floor: the selection and roll-up statements alone, bound once",
}


def render_single_step(data: dict) -> list[str]:
    one = data["single_step"]
    if "error" in one:
        return ["", f"One step, alternated: not measured ({one['error']})."]
    rows = [
        [
            label,
            fmt_ms(one["median_ms"][name]),
            "1.00x" if name == "smdebug_cached" else fmt_x(one["x_smdebug_cached"][name]),
        ]
        for name, label in SINGLE_STEP_CALLS.items()
    ]
    return [
        "",
        f"One step (by_step {one['step']}, node any), the four calls made in turn, "
        f"{'in a new order each round' if 'runs_ms' in one else 'in a rotating order'}, "
        f"for {one['rounds']} rounds; x smdebug cached is the median of each round's time over smdebug's "
        f"(above 1: slower). Other processes kept {one['machine'].get('other_cores', 'n/a')} cores busy "
        "meanwhile.",
        "",
        *table(["call", "median", "x smdebug cached"], rows, "lrr"),
    ]


def render_targets(targets: list[dict]) -> list[str]:
    rows = [
        [t["name"], t["target"], t["measured"], {True: "yes", False: "**no**", None: "n/a"}[t["met"]]]
        for t in targets
    ]
    return ["", *table(["target (10k corpus)", "goal", "measured", "met"], rows, "llll")]
