"""One ingest in its own process, so its peak RSS is its own: ``python -m bench.ingest_child SOURCE STORE``.

Prints one JSON object on stdout: the seconds ``etl.ingest.ingest`` took (imports excluded), the
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
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_child")
    parser.add_argument("source")
    parser.add_argument("store")
    parser.add_argument("--workers", type=int, help="passed as ingest(..., workers=N) when ingest accepts it")
    parser.add_argument("--profile", metavar="FILE", help="also write a cProfile dump of the ingest call")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from etl.ingest import ingest

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
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "import_seconds": import_seconds,
                "report": report.to_dict() | {"failed": len(report.failed), "unrecognised": len(report.unrecognised)},
                "maxrss_self_kb": self_usage.ru_maxrss,
                "maxrss_children_kb": children.ru_maxrss,
                "cpu_seconds_self": self_usage.ru_utime + self_usage.ru_stime,
                "cpu_seconds_children": children.ru_utime + children.ru_stime,
            }
        )
    )
    return 3 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
