"""The benchmark's machinery, shared by every case: which code is measured, child processes and their
memory, timing, and how busy the rest of the machine was meanwhile.

A case file (``bench/<name>.py``) uses it as ``bench.lab.run`` does::

    from bench.lab.harness import OtherLoad, measure

    with OtherLoad() as load:
        timing = measure(lambda: profiles.by_step(5), repeats=7, warmup_s=0.5)
    section = {**timing.to_dict(), "machine": load.result}

Nothing here knows what is measured; bench/README.md says why each probe exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "bench" / "results"
# What "the code measured" is: the package, its SQL and its table contracts.
CODE_FOLDERS = (
    ("etl/proflake", "*.py"),
    ("etl/proflake", "*.c"),
    ("queries", "*.sql"),
    ("schemas", "*.json"),
)

# The default of --warmup: warm cells call first for this long (at least once); bench/README.md, "Fetch
# latency", has the measurement that set it.
WARMUP_S = 0.5


# -- the code measured ------------------------------------------------------------------------------------
def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def timestamp() -> str:
    """A file-name-safe UTC timestamp, for results and snapshots."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"


def git_rev() -> str:
    """The commit measured, marked ``+dirty(...)`` when the measured code has uncommitted changes."""
    if os.environ.get("PROFLAKE_BENCH_GIT"):  # set by --snapshot: the checkout the snapshot was taken of
        return os.environ["PROFLAKE_BENCH_GIT"]
    folders = sorted({folder for folder, _ in CODE_FOLDERS})
    try:
        git = ["git", "-C", str(REPO)]
        rev = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", *folders], capture_output=True, text=True
        ).stdout.strip()
        return (rev or "unknown") + (f"+dirty({'/'.join(folders)})" if dirty else "")
    except OSError:
        return "unknown"


def code_hash(root: Path = REPO) -> str:
    """A hash of the code measured (CODE_FOLDERS), so results name it even with uncommitted edits."""
    digest = hashlib.sha256()
    for folder, pattern in CODE_FOLDERS:
        for path in sorted((root / folder).rglob(pattern)):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def cprofile_decoder() -> str:
    """Which decoder the measured code parses cProfile dumps with: a build without a C compiler, or a
    compiled module older than its source, would make every ingest figure about something else."""
    try:
        from proflake.readers import cprofile
    except ImportError as e:
        return f"n/a ({e})"
    compiled = getattr(cprofile, "_compiled", None)
    if compiled is None:
        return "python"
    source = Path(cprofile.__file__).with_name("_pstats_columns.c")
    stale = source.exists() and source.stat().st_mtime > Path(compiled.__file__).stat().st_mtime
    return "compiled (older than its source: reinstall)" if stale else "compiled"


def snapshot_and_reexec(argv: list[str], target: Path | None, module: str = "bench.lab.run") -> None:
    """Copy the checkout (not .venv) and re-run ``python -m module argv`` from the copy, so edits made to
    the code while the benchmark runs cannot mix two versions of it into one result. Does not return."""
    target = (target or Path(tempfile.gettempdir()) / "proflake-bench" / f"snapshot-{timestamp()}").absolute()
    ignore = shutil.ignore_patterns(
        ".venv", "__pycache__", ".pytest_cache", "results", "proflake-store", "*.egg-info"
    )
    shutil.copytree(REPO, target, ignore=ignore, symlinks=True)
    rest = [a for a in argv if a != "--snapshot"]
    if not any(a == "--json-out" or a.startswith("--json-out=") for a in rest):
        rest += ["--json-out", str(RESULTS_DIR / f"{timestamp()}.json")]
    env = child_env(target)
    env["PROFLAKE_BENCH_GIT"] = git_rev()
    env["PROFLAKE_BENCH_SNAPSHOT"] = str(target)
    print(f"measuring a snapshot of {REPO} taken into {target}", file=sys.stderr, flush=True)
    os.chdir(target)
    os.execve(sys.executable, [sys.executable, "-m", module, *rest], env)


# -- processes and files ----------------------------------------------------------------------------------
def child_env(root: Path = REPO) -> dict[str, str]:
    """The environment of a child process that must import this checkout's proflake and bench."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "etl"), str(root), env.get("PYTHONPATH")]))
    return env


def proflake_exe() -> list[str]:
    """The command that runs the ``proflake`` CLI of this environment."""
    beside = Path(sys.executable).with_name("proflake")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("proflake")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from proflake.cli import main; sys.exit(main())"]


def run_quietly(cmd: list[str]) -> None:
    """Run a command with its output discarded; raise RuntimeError with its stderr's tail if it fails."""
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env())
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")


def dir_bytes(path: Path) -> int:
    """Every byte of every file under ``path`` (links not followed)."""
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Swallow stdout: smdebug and the compatible API print 'No stats were found...' for empty answers."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class TreeRssSampler:
    """Samples the memory of a process and its descendants (psutil) in a thread; keeps the peaks.

    ``peak``: the summed RSS (pages shared between processes count once per process); ``peak_pss``: the
    summed PSS (shared pages divided among their sharers), the tree's real footprint. RSS is cheap to
    read; PSS walks page tables, so it is read at most twice a second, and only when the summed RSS has
    grown by 4 MB since and could beat the PSS peak (PSS <= RSS). PSS peaks between two reads can be
    missed; the sampler costs ~1-2% of a core.

    The tree is found from ``/proc/<pid>/task/<tid>/children`` (Linux), not with psutil's
    ``children(recursive=True)``, which reads every process of the machine: ~85 ms a call on a busy
    host, enough at 20 samples a second to take a core from the ingest being measured."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self.peak_pss = 0
        self.max_processes = 0
        self._pid = pid
        self._processes: dict[int, psutil.Process] = {}
        self._rss_at_pss = 0
        self._pss_at = float("-inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeRssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _tree(self) -> list[psutil.Process]:
        pids, todo = [], [self._pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        todo.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
        tree = []
        for pid in pids:
            process = self._processes.get(pid)
            if process is None or not process.is_running():  # new, or its pid was reused
                try:
                    process = self._processes[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            tree.append(process)
        return tree

    def _sample(self) -> None:
        rss, alive = 0, []
        for process in self._tree():
            try:
                rss += process.memory_info().rss
            except psutil.Error:
                continue
            alive.append(process)
        self.peak = max(self.peak, rss)
        self.max_processes = max(self.max_processes, len(alive))
        now = time.monotonic()
        if rss > self.peak_pss and rss > self._rss_at_pss + (4 << 20) and now - self._pss_at >= 0.5:
            self.peak_pss = max(self.peak_pss, sum(_pss(p) for p in alive))
            self._rss_at_pss, self._pss_at = rss, now

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)


def _pss(process: psutil.Process) -> int:
    try:
        return getattr(process.memory_full_info(), "pss", 0)
    except psutil.Error:
        return 0


# -- how busy the host was --------------------------------------------------------------------------------
def cpu_probe_ms() -> float:
    """A fixed pure-Python loop, best of three: if the host slows the whole VM down (steal time a guest
    cannot always see), this number rises with everything else."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(200_000):
            total += i * i
        best = min(best, time.perf_counter() - started)
    return best * 1000


def busy_seconds() -> float:
    """CPU seconds all CPUs have spent busy since boot (everything but idle and iowait)."""
    t = psutil.cpu_times()
    return (
        sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    )


def own_cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class OtherLoad:
    """How busy the rest of the machine was during a section: all CPUs' busy time minus this process
    tree's, in cores; plus a CPU probe at the start and the load average. ``result`` after the block.

    Our CPU includes children only once they are waited for: measure sections that wait for theirs."""

    result: dict[str, Any]

    def __enter__(self) -> OtherLoad:
        self.probe_ms = cpu_probe_ms()
        self.wall0, self.busy0, self.ours0 = time.perf_counter(), busy_seconds(), own_cpu_seconds()
        self.loadavg0 = os.getloadavg()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.wall0
        busy = busy_seconds() - self.busy0
        ours = own_cpu_seconds() - self.ours0
        self.result = {
            "wall_seconds": round(wall, 3),
            "our_cpu_seconds": round(ours, 3),
            "loadavg_1min_start": self.loadavg0,
            "loadavg_1min_end": os.getloadavg()[0],
            "cpu_probe_ms": round(self.probe_ms, 2),
        }
        if wall > 0:
            self.result["other_cores"] = round(max(0.0, busy - ours) / wall, 2)


def wait_for_quiet(
    max_wait_s: float, log: Callable[[str], None], threshold: float = 0.25, probe_s: float = 3.0
) -> float:
    """Wait (up to max_wait_s) until other processes use less than ``threshold`` cores; return the seconds "
    "waited."""
    if max_wait_s <= 0:
        return 0.0
    started = time.perf_counter()
    told = False
    while True:
        b0 = busy_seconds()
        time.sleep(probe_s)
        cores = (busy_seconds() - b0) / probe_s
        if cores < threshold:
            break
        waited = time.perf_counter() - started
        if waited >= max_wait_s:
            log(f"  machine still busy ({cores:.2f} cores) after {waited:.0f} s; measuring anyway")
            break
        if not told:
            log(f"  waiting for other processes to quiet down ({cores:.2f} cores busy) ...")
            told = True
        time.sleep(5.0)
    return time.perf_counter() - started


# -- timing -----------------------------------------------------------------------------------------------
@dataclass
class Timing:
    """The timed calls of one cell (milliseconds), the last call's result, or the error that stopped it."""

    runs_ms: list[float] = field(default_factory=list)
    error: str | None = None
    result: Any = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.runs_ms) if self.runs_ms else None

    def to_dict(self) -> dict:
        if self.error:
            return {"error": self.error}
        return {
            "median_ms": round(self.median_ms, 3) if self.runs_ms else None,
            "min_ms": round(min(self.runs_ms), 3) if self.runs_ms else None,
            "max_ms": round(max(self.runs_ms), 3) if self.runs_ms else None,
            "runs": len(self.runs_ms),
        }


def measure(
    fn: Callable[[], Any], repeats: int, *, warmup_s: float | None = None, budget_s: float = 60.0
) -> Timing:
    """Median of up to ``repeats`` calls; stops early (after at least one) once ``budget_s`` is spent.
    ``warmup_s``: first call for that long, untimed (at least once). An exception is recorded in the
    Timing, not raised: an API under construction must not sink the whole run."""
    timing = Timing()
    try:
        if warmup_s is not None:
            warming = time.perf_counter()
            timing.result = fn()
            while time.perf_counter() - warming < warmup_s:
                timing.result = fn()
        spent = 0.0
        for _ in range(max(1, repeats)):
            started = time.perf_counter()
            timing.result = fn()
            elapsed = time.perf_counter() - started
            timing.runs_ms.append(elapsed * 1000)
            spent += elapsed
            if spent >= budget_s:
                break
    except Exception as e:
        timing.error = f"{type(e).__name__}: {e}"
    return timing


def fastest_pass(run_pass: Callable[[], dict], passes: int) -> dict:
    """The fastest of ``passes`` whole-corpus passes (each a dict with "seconds"), with the seconds of
    every pass and the machine's other load while they ran."""
    with OtherLoad() as load:
        results = [run_pass() for _ in range(passes)]
    fastest = min(results, key=lambda r: r["seconds"])
    fastest["machine"] = load.result
    fastest["passes_seconds"] = [round(r["seconds"], 3) for r in results]
    return fastest
