"""The workload the benchmark's template profiles are captured from: a training job's start-up and steps.

Run in a fresh interpreter (``python -m bench.workload --out DIR --profiler cprofile``) so the pre-step-zero
interval sees real first imports, as a training script's start-up does. ``proflake.capture.capture.Capture`` profiles
it and writes smdebug's layout; ``bench.corpus`` then re-dumps those real profiles, varied, thousands
of times.

The step is :func:`proflake.capture.sample_job.train_step` (the toy model) plus what a training framework does around
it every step: logging, metric bookkeeping, config copies, JSON lines, a work queue, path handling,
sometimes a checkpoint. That gives step profiles of roughly 250-300 functions; the pre-step-zero
interval imports a large part of the standard library and sets the job up (~2,500-2,800 functions).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import random
import sys
from pathlib import Path

# Imported during the pre-step-zero interval: the job's start-up. Modules the harness itself already
# imported (json, re, ...) are cached and show up only through their use.
STARTUP_IMPORTS = """
argparse ast asyncio base64 bisect bz2 calendar cmd code codecs collections colorsys concurrent.futures
configparser contextlib copy csv dataclasses datetime decimal difflib dis doctest email email.mime.text
email.parser enum filecmp fileinput fnmatch fractions ftplib functools getopt gettext glob gzip hashlib
heapq hmac html html.parser http.client http.cookies http.server imaplib inspect ipaddress logging
logging.config logging.handlers lzma mailbox mimetypes netrc numbers operator optparse pathlib pickle
pickletools platform plistlib poplib pprint profile queue quopri reprlib sched secrets selectors shlex
shutil smtplib socketserver sqlite3 ssl statistics string stringprep struct subprocess tarfile tempfile
textwrap timeit tokenize tomllib trace traceback typing unittest unittest.mock urllib.parse
urllib.request uuid warnings wave weakref xml.dom.minidom xml.etree.ElementTree xml.sax zipfile zipapp
zoneinfo numpy pandas
""".split()

TRAIN_STEPS = 12
EVAL_STEPS = 3
PYINSTRUMENT_TRAIN_STEPS = 6
PYINSTRUMENT_INTERVAL = 0.0005


class Job:
    """What the start-up builds and every step uses."""

    def __init__(self, rng: random.Random) -> None:
        import logging
        import logging.config
        import queue

        from proflake.capture import sample_job

        self.rng = rng
        self.sample_job = sample_job
        self.args = _parse_args()
        self.log_stream = io.StringIO()
        logging.config.dictConfig(
            {
                "version": 1,
                "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
                "handlers": {"mem": {"class": "logging.StreamHandler", "stream": self.log_stream, "formatter": "plain"}},
                "loggers": {"bench.train": {"handlers": ["mem"], "level": "INFO", "propagate": False}},
            }
        )
        self.log = logging.getLogger("bench.train")
        self.config = sample_job.parse_config(rng)
        self.config["optimizer"] = {"name": "sgd", "lr": 0.01, "betas": [0.9, 0.999], "schedule": list(range(8))}
        sample_job.compile_kernels()
        sample_job.define_layer_types()
        self.model = sample_job.build_model(rng, self.config)
        self.losses: list[float] = []
        self.work: queue.Queue = queue.Queue()
        self.checkpoint_dir = Path(self.args.checkpoint_dir)
        self.hparams = _HParams(lr=0.01, batch=32, warmup=3, name="toy")
        self.tokens = _tokenizer_patterns()
        # A first pass over every step helper, as frameworks warm their caches before step 0.
        _exercise_stdlib(self, 0, rng)


def _parse_args():
    parser = argparse.ArgumentParser(prog="train.py", description="toy training job")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("BENCH_CHECKPOINT_DIR", "/tmp"))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fp16", action="store_true")
    group.add_argument("--bf16", action="store_true")
    parser.add_argument("--tags", nargs="*", default=["bench"])
    return parser.parse_args(["--epochs", "2", "--tags", "a", "b"])


def _tokenizer_patterns():
    import re

    return [re.compile(p) for p in (r"\w+", r"\s+", r"[^\w\s]", r"\d+(?:\.\d+)?", r"(?i)step\s*(\d+)")]


def _hparams_class():
    import dataclasses

    @dataclasses.dataclass
    class HParams:
        lr: float
        batch: int
        warmup: int
        name: str
        tags: list = dataclasses.field(default_factory=lambda: ["bench"])

    return HParams


_HParams = None  # defined at start-up (dataclass creation is start-up work)


def _exercise_stdlib(job: Job, step: int, rng: random.Random) -> None:
    """The bookkeeping a framework does around each step; which helpers run depends on the step."""
    import collections
    import copy
    import dataclasses
    import datetime
    import fractions
    import hashlib
    import heapq
    import pprint
    import statistics
    import string
    import textwrap
    from contextlib import ExitStack, contextmanager

    @contextmanager
    def timed(name: str):
        start = datetime.datetime.now()
        try:
            yield
        finally:
            job.log.debug("%s took %s", name, datetime.datetime.now() - start)

    with ExitStack() as stack:
        stack.enter_context(timed("bookkeeping"))
        loss = job.losses[-1] if job.losses else 1.0
        window = job.losses[-20:] or [loss]
        mean = statistics.fmean(window)
        spread = statistics.pstdev(window) if len(window) > 1 else 0.0
        median = statistics.median(window)
        ratio = fractions.Fraction(step + 1, step + 3) + fractions.Fraction(1, 7)
        record = {
            "step": step,
            "loss": round(loss, 5),
            "mean": mean,
            "spread": spread,
            "median": median,
            "ratio": float(ratio),
            "when": datetime.datetime(2025, 11, 30, tzinfo=datetime.timezone.utc).isoformat(),
        }
        job.log.info("step %d loss %.4f mean %.4f", step, loss, mean)
        job.log.info(json.dumps(record, indent=1, sort_keys=True))
        snapshot = copy.deepcopy(job.config)
        params = dataclasses.asdict(job.hparams)
        params = dataclasses.replace(job.hparams, lr=job.hparams.lr * 0.99)
        summary = string.Template("step $step: $loss").substitute(step=step, loss=loss)
        wrapped = textwrap.fill(summary + " " + " ".join(job.config["names"]), width=40)
        counts = collections.Counter(rng.randrange(10) for _ in range(50)).most_common(3)
        top = heapq.nlargest(3, window)
        digest = hashlib.sha1(repr((counts, top, wrapped)).encode()).hexdigest()
        job.work.put((step, digest))
        job.work.get_nowait()
        words = [t.findall(wrapped) for t in job.tokens]
        sample = rng.sample(range(100), 5)
        rng.shuffle(sample)
        if step % 3 == 0:
            pprint.pformat({"params": params, "snapshot": snapshot, "words": words[:2]}, width=60)
        if step % 4 == 1:
            _paths(job, step)
        if step % 10 == 9:
            _checkpoint(job, step)


def _paths(job: Job, step: int) -> None:
    import fnmatch
    import posixpath

    base = job.checkpoint_dir / "runs" / f"step-{step:06d}"
    names = [base.with_suffix(s).name for s in (".pt", ".json", ".log")]
    fnmatch.filter(names, "*.json")
    posixpath.relpath(str(base), str(job.checkpoint_dir))


def _checkpoint(job: Job, step: int) -> None:
    import gzip
    import pickle
    import tempfile

    blob = pickle.dumps({"weights": job.model.weights, "step": step})
    with tempfile.TemporaryDirectory(dir=job.checkpoint_dir) as folder:
        path = Path(folder) / "ckpt.pkl.gz"
        with gzip.open(path, "wb") as f:
            f.write(blob)
        with gzip.open(path, "rb") as f:
            f.read()


def startup(rng: random.Random) -> Job:
    global _HParams
    for name in STARTUP_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # pandas is optional; the pre-step-zero profile is then a little smaller
            pass
    _HParams = _hparams_class()
    return Job(rng)


def train_step(job: Job, step: int) -> None:
    loss = job.sample_job.train_step(job.model, job.rng, step)
    job.losses.append(loss)
    _exercise_stdlib(job, step, job.rng)


def prepare_evaluation(job: Job) -> None:
    import csv

    job.sample_job.prepare_evaluation(job.model)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["step", "loss"])
    writer.writeheader()
    writer.writerows({"step": i, "loss": loss} for i, loss in enumerate(job.losses))


def eval_step(job: Job, step: int) -> None:
    accuracy = job.sample_job.eval_step(job.model, job.rng)
    job.losses.append(1.0 - accuracy)
    _exercise_stdlib(job, step, job.rng)


def finish(job: Job) -> None:
    import logging

    job.sample_job.save_checkpoint(job.model)
    _checkpoint(job, TRAIN_STEPS)
    logging.shutdown()


def capture_job(out: Path, profiler: str, seed: int = 0) -> dict[str, list[str]]:
    """Run the whole job under one profiler; return role -> stats directories (relative to ``out``)."""
    from proflake.capture.capture import Capture

    rng = random.Random(seed)
    os.environ.setdefault("BENCH_CHECKPOINT_DIR", str(out))
    cap = Capture(
        out, framework="pytorch", profiler=profiler, node_id="template", sample_interval=PYINSTRUMENT_INTERVAL
    )
    roles: dict[str, list] = {"pre": [], "train": [], "transition": [], "eval": [], "post": []}
    with cap.pre_step_zero() as interval:
        job = startup(rng)
    roles["pre"].append(interval)
    steps = TRAIN_STEPS if profiler == "cprofile" else PYINSTRUMENT_TRAIN_STEPS
    for step in range(steps):
        with cap.step(step) as interval:
            train_step(job, step)
        roles["train"].append(interval)
    if profiler == "cprofile":
        with cap.mode_change("train", steps - 1, "eval") as interval:
            prepare_evaluation(job)
        roles["transition"].append(interval)
        for step in range(EVAL_STEPS):
            with cap.step(step, mode="eval") as interval:
                eval_step(job, step)
            roles["eval"].append(interval)
        with cap.post_hook_close() as interval:
            finish(job)
        roles["post"].append(interval)
    return {role: [str(i.path.relative_to(out)) for i in items] for role, items in roles.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--profiler", choices=("cprofile", "pyinstrument"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    roles = capture_job(args.out, args.profiler, args.seed)
    json.dump(roles, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
