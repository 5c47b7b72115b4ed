"""proflake demo: generate a sample job, ingest it, and list the commands that answer a few questions.

The job is stamped as if it had started at DEMO_START, whatever the day, so a by-time example in the
docs selects the same intervals on every machine. The CLI runs each command of ``demo_commands`` and
prints exactly what that command prints.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from proflake.capture.sample_job import generate_sample_job
from proflake.errors import ProflakeError
from proflake.ingestion.batch import job_id_for
from proflake.operations import ingest
from proflake.store.store import Store

DEMO_START = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)


def prepare_demo(store: Store, out: Path, *, stderr: Callable[[str], None]) -> str:
    """Write the sample job to ``out`` (replacing a previous demo's), ingest it into ``store``; its job id."""
    out = out.expanduser().absolute()
    if out.exists():
        # Only a folder holding nothing but a previous demo's framework/ tree is replaced.
        if sorted(p.name for p in out.iterdir()) not in ([], ["framework"]):
            raise ProflakeError(
                f"{str(out)!r} exists and does not look like a previous demo's output; pass --out with a new folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    stderr(f"generating a sample job in {out} ...")
    shift = time.time() - DEMO_START.timestamp()
    generate_sample_job(out, nodes=2, train_steps=4, eval_steps=2, clock=lambda: time.time() - shift)

    _check_demo_store(store)
    _mark_demo_store(store)
    job_id = job_id_for(out.parts, out.parts)
    # Under the writer lock, in one commit, the sample job replaces what a previous demo ingested from
    # the same folder (a full refresh is scoped to its source: nothing else is touched).
    report = ingest(str(out), store, full_refresh=True, log=stderr)
    stderr(report.summary())
    stderr(f"store: {store.location}")
    return job_id


def demo_commands(job_id: str, store_args: list[str], report_page: str) -> list[tuple[str, list[str]]]:
    """(title, proflake arguments) of the questions the demo answers; ``store_args`` name a store that
    is not the default one; ``report_page`` is where the HTML report goes."""
    job = ["--job", job_id, *store_args]
    window = ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.2Z"]  # DEMO_START and 0.2 s after it
    return [
        ("Jobs in the store", ["jobs", *store_args]),
        ("cProfile intervals of node algo-1", ["list", *job, "--profiler", "cprofile", "--node", "algo-1"]),
        ("Step 1 of training, top 5 by cumulative time", ["fetch", "by-step", "1", *job, "--top", "5"]),
        ("Job phases, top 3 by own time", ["fetch", "by-job-phase", *job, "--top", "3", "--sort", "tottime"]),
        ("The train -> eval switch on algo-1", ["fetch", "between-modes", "train", "eval", *job, "--node", "algo-1", "--top", "3"]),
        ("The first 0.2 s of the job (the demo starts at 2024-05-01 12:00 UTC)", ["fetch", "by-time", *window, *job, "--top", "5"]),
        ("pyinstrument: train steps 0-3, top 5", ["fetch", "by-step", "0", "3", *job, "--profiler", "pyinstrument", "--top", "5"]),
        ("An HTML report of the whole job (open it in a browser)", ["report", "job", *job, "--out", report_page]),
    ]


# A demo store is marked so a later demo may write to it again; any other store must be empty.
DEMO_MARK = "_proflake/demo-store"


def _check_demo_store(store: Store) -> None:
    """The demo writes only to a store it created (marked) or an empty one: never to real data."""
    if not store.exists() or _is_marked(store):
        return
    store.create()  # a store missing a table created after it was written: only the check reads it
    holds = sum(1 for _ in store.rows("intervals", ["job_id"])) + sum(1 for _ in store.rows("batches", ["batch_id"]))
    if holds:
        jobs = sorted({row[0] for row in store.rows("intervals", ["job_id"])})
        named = f" (jobs: {', '.join(jobs[:5])}{', ...' if len(jobs) > 5 else ''})" if jobs else ""
        raise ProflakeError(
            f"the store at {store.location!r} holds data the demo did not write{named}; the demo writes only "
            "to a store it creates or an empty one: pass --store with a new folder"
        )


def _is_marked(store: Store) -> bool:
    return not store.is_remote and (Path(store.root) / DEMO_MARK).is_file()


def _mark_demo_store(store: Store) -> None:
    if not store.is_remote:
        (Path(store.root) / DEMO_MARK).parent.mkdir(parents=True, exist_ok=True)
        (Path(store.root) / DEMO_MARK).write_text("written by 'proflake demo'\n", encoding="utf-8")

