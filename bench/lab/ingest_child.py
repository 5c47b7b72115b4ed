"""One ingest in its own process, so its peak RSS is its own: ``python -m bench.lab.ingest_child SOURCE STORE``.

Prints one JSON object on stdout: the seconds ``proflake.ingestion.batch.ingest`` took (imports excluded), the
IngestReport, and ``getrusage`` peak RSS of this process and of any worker processes it waited for.
"""

from __future__ import annotations

import argparse
import inspect
import json
import resource
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.ingest_child")
    parser.add_argument("source")
    parser.add_argument("store")
    parser.add_argument("--workers", type=int, help="passed as ingest(..., workers=N) when ingest accepts it")
    parser.add_argument("--profile", metavar="FILE", help="also write a cProfile dump of the ingest call")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from proflake.ingestion.batch import ingest

    import_seconds = time.perf_counter() - started
    kwargs = {}
    if args.workers is not None:
        if "workers" not in inspect.signature(ingest).parameters:
            print(json.dumps({"error": "ingest() has no workers parameter"}))
            return 2
        kwargs["workers"] = args.workers
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    report = ingest(args.source, args.store, **kwargs)
    seconds = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    workers = _descendants_usage()
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "import_seconds": import_seconds,
                "report": report.to_dict() | {"failed": len(report.failed), "unrecognised": len(report.unrecognised)},
                # getrusage's peak starts from the parent's RSS at the fork (Linux keeps it across exec):
                # the bench's own process, ~270 MB at 10k files. VmHWM is this process's own.
                "maxrss_self_kb": self_usage.ru_maxrss,
                "hwm_self_kb": _vm_hwm_kb("self"),
                "maxrss_children_kb": children.ru_maxrss,
                "cpu_seconds_self": self_usage.ru_utime + self_usage.ru_stime,
                "cpu_seconds_children": children.ru_utime + children.ru_stime,
                # Workers still alive when ingest() returned (a pool may keep them for reuse): their
                # CPU time and kernel-tracked peak RSS (VmHWM), read before they are stopped.
                "live_descendants": workers,
            }
        )
    )
    return 3 if report.failed else 0


def _descendants_usage() -> list[dict]:
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    out, todo, seen = [], [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            hwm = (_vm_hwm_kb(pid) or 0) / 1024
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            out.append({
                "pid": pid,
                "command": cmd[:120],
                "cpu_seconds": (int(fields[11]) + int(fields[12])) / ticks,
                "peak_rss_mb": hwm,
            })
        except (OSError, ValueError, IndexError):
            pass
    return out


def _vm_hwm_kb(pid: int | str) -> int | None:
    """The kernel's peak resident set of a process (VmHWM), in kB; None where /proc has none."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


if __name__ == "__main__":
    sys.exit(main())
