"""proflake demo: generate a sample job, ingest it, and answer a few of smdebug's questions."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from proflake.capture.sample_job import generate_sample_job
from proflake.errors import ProflakeError
from proflake.ingestion.batch import job_id_for
from proflake.operations import ingest
from proflake.query.profiles import Profiles
from proflake.render.output import render
from proflake.store.store import Store


def run_demo(store: Store, out: Path, *, stdout: Callable[[str], None], stderr: Callable[[str], None]) -> None:
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
    generate_sample_job(out, nodes=2, train_steps=4, eval_steps=2)

    store.create()
    job_id = job_id_for(out.parts, out.parts)
    store.delete_job(job_id)  # the demo's job replaces the one a previous demo ingested
    report = ingest(str(out), store, log=stderr)
    stderr(report.summary())
    stderr(f"store: {store.location}")

    profiles = Profiles(store)
    scope = {"job": job_id}

    def show(title: str, command: str, table) -> None:
        stdout(f"\n== {title}\n$ {command}\n")
        stdout(render(table, "table").decode().rstrip())

    show("Jobs in the store", "proflake jobs", profiles.jobs())
    show("Nodes", f"proflake nodes --job {job_id}", _column("node_id", profiles.nodes(**scope)))
    listing = profiles.list_profile_stats(**scope, profiler="cprofile").select(
        ["node_id", "start_mode", "start_step", "start_phase", "end_mode", "end_step", "end_phase", "job_phase", "function_count"]
    )
    show("cProfile intervals", f"proflake list --job {job_id} --profiler cprofile", listing)
    step = profiles.by_step(1, **scope, top=5).table.select(["function", "total_calls", "tottime", "cumtime"])
    show("Step 1 of training, top 5 by cumulative time", f"proflake fetch by-step 1 --job {job_id} --top 5", step)
    phases = profiles.by_job_phase(**scope, top=3, sort="tottime").table.select(["job_phase", "function", "total_calls", "tottime"])
    show("Job phases, top 3 by own time", f"proflake fetch by-job-phase --job {job_id} --top 3 --sort tottime", phases)
    modes = profiles.between_modes("train", "eval", **scope, node="algo-1", top=3).table.select(["function", "cumtime"])
    show("The train -> eval switch on algo-1", f"proflake fetch between-modes train eval --job {job_id} --node algo-1 --top 3", modes)
    sampled = profiles.by_step(0, 3, **scope, profiler="pyinstrument", top=5).table.select(["function", "self_time", "total_time"])
    show("pyinstrument: train steps 0-3, top 5", f"proflake fetch by-step 0 3 --job {job_id} --profiler pyinstrument --top 5", sampled)
    page = out.with_name(out.name + "-report.html")
    profiles.report(job=job_id).write(page)
    stdout(f"\n== An HTML report of the whole job (open it in a browser)\n$ proflake report job --job {job_id} --out {page}\n")
    stdout(f"wrote {page}")
    stdout(f"\nNext: proflake sql \"SELECT node_id, count(*) FROM intervals GROUP BY ALL\" --store {store.location}")


def _column(name: str, values: list):
    import pyarrow as pa

    return pa.table({name: pa.array(values, pa.string())})
