"""Generate a realistic smdebug profiling corpus, fast: N nodes x S steps, both profilers.

Profiling a real workload 10,000 times would take hours, so the corpus is built in two stages:

1. **Templates** (a few seconds): :mod:`bench.workload` runs a small training job in fresh interpreters
   under ``proflake.capture.capture.Capture``, once with cProfile and once with pyinstrument. Those are real profiles:
   a pre-step-zero interval that imports much of the standard library, numpy and pandas (~2,700
   functions), train steps of ~230-380 functions (the toy model plus logging, metrics, config copies,
   JSON lines, periodic checkpoints), a train->eval transition, eval steps, a post-hook-close interval,
   and pyinstrument sessions of the same.
2. **Corpus** (about a millisecond per file): every interval of every node re-dumps one template with
   its call counts multiplied by a small integer and its times scaled so the profile accounts for most
   of the interval's wall time (each function's times jittered by +-10%), written under smdebug's
   layout with ``proflake.capture.capture.stats_dir_name`` names. The pstats structure stays valid: cc <= nc, every
   caller edge scaled like its callee. pyinstrument sessions get the interval's start time and scaled
   frame times; their HTML pages are hard links to the template's (nothing reads them but a browser).

Per node (``algo-1``..): one pre-step-zero interval, S train steps, a train->eval interval, E eval
steps (about a tenth of the steps), one post-hook-close interval; ``--files`` counts the cProfile files
of all nodes. pyinstrument intervals cover the pre-step-zero interval and ``--pyinstrument-fraction``
of the train steps of each node.

Deterministic given ``--seed`` and the templates: pass ``--templates DIR`` (a previous corpus's
``templates/``) to get byte-identical stats files; fresh templates are new real profiles, so their
times differ run to run.

    python -m bench.corpus --files 2000 --out /tmp/proflake-bench/corpus-2k
"""

from __future__ import annotations

import argparse
import json
import marshal
import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from proflake.capture.capture import (
    CPROFILE_FILE,
    PYINSTRUMENT_HTML_FILE,
    PYINSTRUMENT_JSON_FILE,
    stats_dir_name,
)

FRAMEWORK = "pytorch"
JOB_NAME = "bench-job"
MANIFEST = "corpus.json"
# 2025-11-30T00:00:00Z: every generated interval starts after this.
JOB_START_S = 1764460800.0
EVAL_FRACTION = 0.1
MIN_FILES_PER_NODE = 10


# -- templates --------------------------------------------------------------------------------------------
def capture_templates(out: Path, seed: int = 0) -> Path:
    """Run bench.workload under both profilers in fresh interpreters; write ``out/roles.json``."""
    out.mkdir(parents=True, exist_ok=True)
    roles = {}
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo / "etl"), str(repo), os.environ.get("PYTHONPATH")]))}
    for profiler in ("cprofile", "pyinstrument"):
        done = subprocess.run(
            [sys.executable, "-m", "bench.workload", "--out", str(out), "--profiler", profiler, "--seed", str(seed)],
            check=True, capture_output=True, text=True, cwd=repo, env=env,
        )
        roles[profiler] = json.loads(done.stdout)
    (out / "roles.json").write_text(json.dumps(roles, indent=1))
    return out


@dataclass
class CProfileTemplate:
    stats: dict
    total_tt: float


@dataclass
class PyinstrumentTemplate:
    doc: dict
    html: Path


def load_templates(folder: Path) -> tuple[dict[str, list[CProfileTemplate]], dict[str, list[PyinstrumentTemplate]]]:
    roles = json.loads((folder / "roles.json").read_text())
    cprofile: dict[str, list[CProfileTemplate]] = {}
    for role, dirs in roles["cprofile"].items():
        items = []
        for d in dirs:
            stats = marshal.loads((folder / d / CPROFILE_FILE).read_bytes())
            items.append(CProfileTemplate(stats, sum(v[2] for v in stats.values()) or 1e-6))
        cprofile[role] = items
    pyinstrument: dict[str, list[PyinstrumentTemplate]] = {}
    for role, dirs in roles["pyinstrument"].items():
        pyinstrument[role] = [
            PyinstrumentTemplate(json.loads((folder / d / PYINSTRUMENT_JSON_FILE).read_text()), folder / d / PYINSTRUMENT_HTML_FILE)
            for d in dirs
        ]
    return cprofile, pyinstrument


# -- variation --------------------------------------------------------------------------------------------
def vary_cprofile(stats: dict, calls: int, scale: float, rng: random.Random) -> dict:
    """The template with counts x ``calls`` and times x ``scale`` (x per-function jitter); still valid pstats."""
    out = {}
    for key, (cc, nc, tt, ct, callers) in stats.items():
        f = scale * (0.9 + 0.2 * rng.random())
        out[key] = (
            cc * calls,
            nc * calls,
            tt * f,
            ct * f,
            {ck: (e_nc * calls, e_cc * calls, e_tt * f, e_ct * f) for ck, (e_nc, e_cc, e_tt, e_ct) in callers.items()},
        )
    return out


def _scale_frame(frame: dict, scale: float) -> dict:
    out = dict(frame)
    out["time"] = frame["time"] * scale
    if "await_time" in frame:
        out["await_time"] = frame["await_time"] * scale
    children = frame.get("children")
    if children:
        out["children"] = [_scale_frame(c, scale) for c in children]
    return out


def vary_pyinstrument(doc: dict, start_s: float, duration_s: float) -> dict:
    scale = duration_s / (doc.get("duration") or duration_s)
    out = dict(doc)
    out["start_time"] = start_s
    out["duration"] = duration_s
    if doc.get("cpu_time") is not None:
        out["cpu_time"] = doc["cpu_time"] * scale
    if doc.get("sample_count") is not None:
        out["sample_count"] = max(1, round(doc["sample_count"] * scale))
    if doc.get("root_frame") is not None:
        out["root_frame"] = _scale_frame(doc["root_frame"], scale)
    return out


# -- the corpus -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodePlan:
    node_id: str
    index: int
    train_steps: int
    eval_steps: int


def plan(files: int, nodes: int) -> list[NodePlan]:
    if nodes < 1:
        raise SystemExit("--nodes must be at least 1")
    if files < nodes * MIN_FILES_PER_NODE:
        raise SystemExit(f"--files must be at least {MIN_FILES_PER_NODE} per node ({nodes * MIN_FILES_PER_NODE})")
    plans = []
    for i in range(nodes):
        n = files // nodes + (1 if i < files % nodes else 0)
        steps = n - 3  # pre-step-zero, train->eval, post-hook-close
        eval_steps = max(1, round(steps * EVAL_FRACTION))
        plans.append(NodePlan(f"algo-{i + 1}", i + 1, steps - eval_steps, eval_steps))
    return plans


class _Writer:
    def __init__(self, job_dir: Path, profiler: str, node_id: str) -> None:
        self.node_dir = job_dir / "framework" / FRAMEWORK / profiler / node_id
        self.files = 0
        self.bytes = 0
        self.html_bytes = 0

    def stats_dir(self, start: tuple, start_s: float, end: tuple, end_s: float) -> Path:
        # smdebug writes time.time() * 1000000 formatted with str(); so does proflake.capture.capture.stats_dir_name.
        path = self.node_dir / stats_dir_name(start, start_s * 1_000_000, end, end_s * 1_000_000)
        path.mkdir(parents=True)
        return path

    def write(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        self.files += 1
        self.bytes += len(data)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_node(job_dir: Path, templates_dir: Path, node: NodePlan, seed: int, pyinstrument_fraction: float) -> dict:
    """Write one node's intervals; return what was written and the times the benchmark queries use."""
    cprofile_t, pyinstrument_t = load_templates(templates_dir)
    rng = random.Random(f"proflake-bench:{seed}:{node.node_id}")
    cp = _Writer(job_dir, "cprofile", node.node_id)
    pi = _Writer(job_dir, "pyinstrument", node.node_id)
    step_times: list[tuple[float, float]] = []

    def cprofile_interval(role: str, which: int, start: tuple, start_s: float, end: tuple, end_s: float) -> None:
        template = cprofile_t[role][which % len(cprofile_t[role])]
        calls = rng.choice((1, 1, 1, 2, 3))
        scale = (end_s - start_s) * rng.uniform(0.85, 0.97) / template.total_tt
        stats = vary_cprofile(template.stats, calls, scale, rng)
        cp.write(cp.stats_dir(start, start_s, end, end_s) / CPROFILE_FILE, marshal.dumps(stats))

    def pyinstrument_interval(role: str, which: int, start: tuple, start_s: float, end: tuple, end_s: float) -> None:
        template = pyinstrument_t[role][which % len(pyinstrument_t[role])]
        doc = vary_pyinstrument(template.doc, start_s, end_s - start_s)
        folder = pi.stats_dir(start, start_s, end, end_s)
        pi.write(folder / PYINSTRUMENT_JSON_FILE, json.dumps(doc).encode())
        _link(template.html, folder / PYINSTRUMENT_HTML_FILE)
        pi.html_bytes += template.html.stat().st_size

    # Nodes start a fraction of a second apart and finish start-up within half a second of each other.
    t = JOB_START_S + 0.137 * node.index + rng.uniform(0.0, 0.05)
    pre = (("prestepzero", "*", "start"), t, ("train", 0, "stepstart"), t + 30.0 + rng.uniform(0.0, 0.5))
    cprofile_interval("pre", 0, *pre)
    pyinstrument_interval("pre", 0, *pre)
    t = pre[3]
    for step in range(node.train_steps):
        start_s = t + rng.uniform(0.005, 0.03)
        end_s = start_s + rng.uniform(0.25, 0.45)
        bounds = (("train", step, "stepstart"), start_s, ("train", step, "stepend"), end_s)
        cprofile_interval("train", step, *bounds)
        if rng.random() < pyinstrument_fraction:
            pyinstrument_interval("train", step, *bounds)
        step_times.append((start_s, end_s))
        t = end_s
    last = node.train_steps - 1
    transition = (("train", last, "stepend"), t, ("eval", 0, "stepstart"), t + rng.uniform(1.5, 2.5))
    cprofile_interval("transition", 0, *transition)
    t = transition[3]
    for step in range(node.eval_steps):
        start_s = t + rng.uniform(0.005, 0.03)
        end_s = start_s + rng.uniform(0.1, 0.2)
        cprofile_interval("eval", step, ("eval", step, "stepstart"), start_s, ("eval", step, "stepend"), end_s)
        t = end_s
    post_start = t + rng.uniform(0.3, 0.6)
    cprofile_interval(
        "post", 0, ("prestepzero", "*", "end"), post_start, ("posthookclose", "*", "end"), post_start + rng.uniform(3.0, 5.0)
    )
    # A by-time window: five train steps in the middle of the run, inside step boundaries of this node.
    mid = node.train_steps // 2
    window_steps = step_times[mid : mid + 5] or step_times[-1:]
    return {
        "node_id": node.node_id,
        "train_steps": node.train_steps,
        "eval_steps": node.eval_steps,
        "cprofile_files": cp.files,
        "cprofile_bytes": cp.bytes,
        "pyinstrument_intervals": pi.files,
        "pyinstrument_json_bytes": pi.bytes,
        "pyinstrument_html_bytes": pi.html_bytes,
        "first_start_s": pre[1],
        "window_s": [window_steps[0][0] + 0.01, window_steps[-1][1] - 0.01],
    }


def generate(
    out: Path,
    *,
    files: int = 2000,
    nodes: int = 4,
    pyinstrument_fraction: float = 0.1,
    seed: int = 0,
    templates: Path | None = None,
    jobs: int = 2,
    force: bool = False,
    log=print,
) -> dict:
    """Write templates (unless given), the job under ``out/bench-job`` and ``out/corpus.json``; return the manifest."""
    out = Path(out).absolute()
    plans = plan(files, nodes)
    job_dir = out / JOB_NAME
    if job_dir.exists():
        if not force:
            raise SystemExit(f"{job_dir} exists; pass --force to replace it, or reuse it with bench.lab.run --corpus {out}")
        shutil.rmtree(job_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if templates is None:
        templates = out / "templates"
        if templates.exists():
            shutil.rmtree(templates)
        log(f"capturing template profiles into {templates} ...")
        capture_templates(templates, seed)
    templates = Path(templates).absolute()
    template_seconds = time.perf_counter() - started
    log(f"writing {files} cProfile files for {nodes} node(s) into {job_dir} ...")
    started = time.perf_counter()
    args = [(job_dir, templates, p, seed, pyinstrument_fraction) for p in plans]
    if jobs > 1 and len(plans) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(plans))) as pool:
            per_node = list(pool.map(write_node, *zip(*args)))
    else:
        per_node = [write_node(*a) for a in args]
    write_seconds = time.perf_counter() - started
    raw = {
        "cprofile": sum(n["cprofile_bytes"] for n in per_node),
        "pyinstrument_json": sum(n["pyinstrument_json_bytes"] for n in per_node),
        "pyinstrument_html": sum(n["pyinstrument_html_bytes"] for n in per_node),
    }
    first = min(per_node, key=lambda n: (n["first_start_s"], n["node_id"]))
    manifest = {
        "params": {
            "files": files,
            "nodes": nodes,
            "pyinstrument_fraction": pyinstrument_fraction,
            "seed": seed,
            "templates": str(templates),
        },
        "job_dir": str(job_dir),
        "job_id": JOB_NAME,
        "framework": FRAMEWORK,
        "cprofile_dir": str(job_dir / "framework" / FRAMEWORK / "cprofile"),
        "pyinstrument_dir": str(job_dir / "framework" / FRAMEWORK / "pyinstrument"),
        "node_ids": [n["node_id"] for n in per_node],
        "any_node": first["node_id"],
        "cprofile_files": sum(n["cprofile_files"] for n in per_node),
        "pyinstrument_intervals": sum(n["pyinstrument_intervals"] for n in per_node),
        "raw_bytes": raw,
        "ingestible_bytes": raw["cprofile"] + raw["pyinstrument_json"],
        "min_train_steps": min(n["train_steps"] for n in per_node),
        "by_time_window_s": first["window_s"],
        "nodes": per_node,
        "seconds": {"templates": round(template_seconds, 3), "write": round(write_seconds, 3)},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    log(
        f"corpus: {manifest['cprofile_files']} cProfile files ({raw['cprofile'] / 1e6:.1f} MB raw), "
        f"{manifest['pyinstrument_intervals']} pyinstrument sessions ({raw['pyinstrument_json'] / 1e6:.1f} MB json, "
        f"{raw['pyinstrument_html'] / 1e6:.1f} MB html as hard links); written in {write_seconds:.1f} s"
    )
    return manifest


def load_manifest(out: Path) -> dict:
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise SystemExit(f"{path} not found: {out} is not a corpus written by bench.corpus")
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="cProfile files in total (default 2000)")
    parser.add_argument("--nodes", type=int, default=4, help="nodes algo-1..algo-N (default 4)")
    parser.add_argument("--pyinstrument-fraction", type=float, default=0.1, help="train steps also profiled by pyinstrument")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--templates", type=Path, help="reuse this templates/ folder instead of capturing new ones")
    parser.add_argument("--jobs", type=int, default=2, help="processes writing nodes in parallel (default 2)")
    parser.add_argument("--force", action="store_true", help="replace an existing corpus in --out")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    manifest = generate(
        args.out,
        files=args.files,
        nodes=args.nodes,
        pyinstrument_fraction=args.pyinstrument_fraction,
        seed=args.seed,
        templates=args.templates,
        jobs=args.jobs,
        force=args.force,
    )
    print(f"raw bytes: {manifest['raw_bytes']['cprofile']} cProfile, {manifest['raw_bytes']['pyinstrument_json']} pyinstrument json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
