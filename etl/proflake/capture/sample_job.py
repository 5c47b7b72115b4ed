"""Generate a small but real smdebug-layout profiling job, for the demo and the tests.

A toy pure-Python "model" is trained and evaluated on every node while :class:`proflake.capture.capture.Capture`
profiles it, so the stats files are genuine cProfile and pyinstrument output with recognisable
function names (``forward``, ``backward``, ``load_batch``, ``build_model``, ...), not fixtures that
could drift from what the profilers really write.

Per node the job is run twice, once under each profiler, because cProfile and pyinstrument cannot
profile the same thread at once; in a real job each run would be a separate training job.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from proflake.capture.capture import CPROFILE, PYINSTRUMENT, Capture
from proflake.errors import UsageError

# Small enough that a whole job takes well under a second or two, large enough that pyinstrument
# (sampling every 0.5 ms) sees tens of samples per step.
_WIDTH = 32
_BATCH = 32
_PYINSTRUMENT_INTERVAL = 0.0005


@dataclass(frozen=True)
class SampleJob:
    """Where a generated job lives and which stats directories it wrote, in the order written."""

    base_dir: Path
    framework: str
    node_ids: tuple[str, ...]
    stats_dirs: dict[str, tuple[Path, ...]]  # profiler name -> stats directories, all nodes

    def node_stats_dirs(self, profiler: str, node_id: str) -> tuple[Path, ...]:
        return tuple(p for p in self.stats_dirs[profiler] if p.parent.name == node_id)


def generate_sample_job(
    base_dir: str | Path,
    *,
    nodes: int = 2,
    train_steps: int = 4,
    eval_steps: int = 2,
    framework: str = "pytorch",
    seed: int = 0,
    clock: Callable[[], float] = time.time,
) -> SampleJob:
    """Write a job with nodes ``algo-1``..``algo-{nodes}`` under ``base_dir``, profiled by both profilers.

    cProfile, per node: pre-step-zero, train steps 0..train_steps-1, train->eval transition, eval steps
    0..eval_steps-1, post-hook-close. pyinstrument, per node: pre-step-zero, the train steps and eval
    step 0. With ``eval_steps=0`` the transition and eval intervals are left out. ``clock`` stamps the
    intervals (seconds since the epoch, like ``time.time``).
    """
    if nodes < 1 or train_steps < 1 or eval_steps < 0:
        raise UsageError(
            f"a sample job needs nodes >= 1, train_steps >= 1 and eval_steps >= 0; "
            f"got nodes={nodes}, train_steps={train_steps}, eval_steps={eval_steps}"
        )
    base = Path(base_dir)
    node_ids = tuple(f"algo-{i}" for i in range(1, nodes + 1))
    written: dict[str, list[Path]] = {CPROFILE: [], PYINSTRUMENT: []}
    for index, node_id in enumerate(node_ids):
        # Each node gets its own data, as data-parallel workers would.
        node_seed = seed * 1000 + index
        cprofile = Capture(base, framework=framework, profiler=CPROFILE, node_id=node_id, clock=clock)
        written[CPROFILE] += _run_cprofile(cprofile, random.Random(node_seed), train_steps, eval_steps)
        pyinstrument = Capture(
            base, framework=framework, profiler=PYINSTRUMENT, node_id=node_id,
            sample_interval=_PYINSTRUMENT_INTERVAL, clock=clock,
        )
        written[PYINSTRUMENT] += _run_pyinstrument(
            pyinstrument, random.Random(node_seed), train_steps, eval_steps
        )
    return SampleJob(base, framework, node_ids, {name: tuple(dirs) for name, dirs in written.items()})


def _run_cprofile(capture: Capture, rng: random.Random, train_steps: int, eval_steps: int) -> list[Path]:
    intervals = []
    with capture.pre_step_zero() as interval:
        model = initialize(rng)
    intervals.append(interval)
    for step in range(train_steps):
        with capture.step(step) as interval:
            train_step(model, rng, step)
        intervals.append(interval)
    if eval_steps:
        with capture.mode_change("train", train_steps - 1, "eval") as interval:
            prepare_evaluation(model)
        intervals.append(interval)
        for step in range(eval_steps):
            with capture.step(step, mode="eval") as interval:
                eval_step(model, rng)
            intervals.append(interval)
    with capture.post_hook_close() as interval:
        save_checkpoint(model)
    intervals.append(interval)
    return [i.path for i in intervals if i.path is not None]


def _run_pyinstrument(capture: Capture, rng: random.Random, train_steps: int, eval_steps: int) -> list[Path]:
    intervals = []
    with capture.pre_step_zero() as interval:
        model = initialize(rng)
    intervals.append(interval)
    for step in range(train_steps):
        with capture.step(step) as interval:
            train_step(model, rng, step)
        intervals.append(interval)
    if eval_steps:
        prepare_evaluation(model)  # unprofiled: pyinstrument only samples the steps
        with capture.step(0, mode="eval") as interval:
            eval_step(model, rng)
        intervals.append(interval)
    return [i.path for i in intervals if i.path is not None]


# --- the toy workload; its function names are what the profiles show -------------------------------

Matrix = list[list[float]]


@dataclass
class ToyModel:
    weights: Matrix
    bias: list[float]
    config: dict[str, object]
    learning_rate: float = 0.01


def initialize(rng: random.Random) -> ToyModel:
    """Heavier and more varied than a step, like framework start-up: parsing, compiling, building."""
    config = parse_config(rng)
    compile_kernels()
    define_layer_types()
    return build_model(rng, config)


def parse_config(rng: random.Random) -> dict[str, object]:
    layers = ["dense", "relu"] * 4
    text = json.dumps({"width": _WIDTH, "batch": _BATCH, "lr": 0.01, "seed": rng.random(), "layers": layers})
    config = json.loads(text)
    # Patterns are compiled fresh each run so every node's pre-step-zero shows re's compiler, not its cache.
    re.purge()
    config["names"] = [re.sub(r"[^a-z]+", "_", f"Layer {i}: {kind}".lower()) for i, kind in enumerate(layers)]
    return config


def compile_kernels() -> None:
    for i in range(12):
        source = f"def kernel_{i}(x):\n    return [v * {i + 1} + {i} for v in x if v > {i / 10}]\n"
        tree = ast.parse(source)
        namespace: dict[str, object] = {}
        exec(compile(tree, f"<kernel_{i}>", "exec"), namespace)


def define_layer_types() -> None:
    for kind in ("Dense", "Relu", "Dropout"):
        fields: list[tuple[str, type] | tuple[str, type, object]] = [
            ("size", int), ("name", str, dataclasses.field(default=kind))
        ]
        dataclasses.make_dataclass(f"{kind}Layer", fields)


def build_model(rng: random.Random, config: dict[str, object]) -> ToyModel:
    weights = [[rng.gauss(0.0, 0.1) for _ in range(_WIDTH)] for _ in range(_WIDTH)]
    return ToyModel(weights, [0.0] * _WIDTH, config)


def load_batch(rng: random.Random) -> tuple[Matrix, list[int]]:
    # Stands in for I/O: waiting time that cProfile shows under time.sleep and pyinstrument samples.
    time.sleep(rng.uniform(0.001, 0.003))
    inputs = [[rng.uniform(-1.0, 1.0) for _ in range(_WIDTH)] for _ in range(_BATCH)]
    labels = [rng.randrange(_WIDTH) for _ in range(_BATCH)]
    return inputs, labels


def forward(model: ToyModel, inputs: Matrix) -> Matrix:
    return [softmax(relu(linear(model, row))) for row in inputs]


def linear(model: ToyModel, row: list[float]) -> list[float]:
    return [sum(w * x for w, x in zip(weights, row)) + b for weights, b in zip(model.weights, model.bias)]


def relu(row: list[float]) -> list[float]:
    return [max(0.0, v) for v in row]


def softmax(row: list[float]) -> list[float]:
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    total = sum(exps)
    return [e / total for e in exps]


def loss_fn(outputs: Matrix, labels: list[int]) -> float:
    return -sum(math.log(out[label] + 1e-9) for out, label in zip(outputs, labels)) / len(labels)


def backward(model: ToyModel, inputs: Matrix, outputs: Matrix, labels: list[int]) -> Matrix:
    grads = [[0.0] * _WIDTH for _ in range(_WIDTH)]
    for row, out, label in zip(inputs, outputs, labels):
        for j in range(_WIDTH):
            delta = out[j] - (1.0 if j == label else 0.0)
            grad_row = grads[j]
            for k in range(_WIDTH):
                grad_row[k] += delta * row[k]
    return grads


def optimizer_step(model: ToyModel, grads: Matrix) -> None:
    for weights, grad_row in zip(model.weights, grads):
        for k, g in enumerate(grad_row):
            weights[k] -= model.learning_rate * g / _BATCH


def tree_size(depth: int) -> int:
    """Recursive, so profiles carry a recursive function (cProfile's primitive vs total calls differ)."""
    if depth <= 0:
        return 1
    return 1 + tree_size(depth - 1) + tree_size(depth - 2)


def log_metrics(step: int, loss: float, extra: dict[str, object]) -> str:
    line = json.dumps({"step": step, "loss": round(loss, 6), **extra}, sort_keys=True)
    return re.sub(r"\d+\.\d{4,}", lambda m: f"{float(m.group()):.4f}", line)


def train_step(model: ToyModel, rng: random.Random, step: int) -> float:
    inputs, labels = load_batch(rng)
    outputs = forward(model, inputs)
    loss = loss_fn(outputs, labels)
    optimizer_step(model, backward(model, inputs, outputs, labels))
    log_metrics(step, loss, {"nodes_visited": tree_size(10)})
    return loss


def prepare_evaluation(model: ToyModel) -> None:
    # Snapshot before evaluation, as frameworks do when switching to eval mode.
    json.loads(json.dumps({"weights": model.weights, "bias": model.bias}))


def eval_step(model: ToyModel, rng: random.Random) -> float:
    inputs, labels = load_batch(rng)
    outputs = forward(model, inputs)
    predictions = [max(range(_WIDTH), key=out.__getitem__) for out in outputs]
    correct = sum(1 for predicted, label in zip(predictions, labels) if predicted == label)
    log_metrics(0, loss_fn(outputs, labels), {"accuracy": correct / len(labels)})
    return correct / len(labels)


def save_checkpoint(model: ToyModel) -> str:
    return json.dumps({"config": model.config, "weights": model.weights, "bias": model.bias})
