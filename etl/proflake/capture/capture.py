"""Profile intervals of a training loop and write them exactly where and how smdebug would.

smdebug writes one directory per profiled interval::

    {base}/framework/{framework}/{profiler}/{node_id}/
        {start_mode}-{start_step}-{start_phase}-{start_time_us}_{end_mode}-{end_step}-{end_phase}-{end_time_us}/

holding ``python_stats`` (cProfile, ``pstats`` dump) or ``python_stats.json`` + ``python_stats.html``
(pyinstrument). Writing the same layout without SageMaker lets any training script feed proflake, and
gives the tests profiles that are real rather than hand-made.

Usage in a plain PyTorch/JAX-style loop::

    from proflake.capture.capture import Capture

    capture = Capture("/tmp/profiler", framework="pytorch", profiler="cprofile", node_id="algo-1")
    with capture.pre_step_zero():                 # prestepzero-*-start -> train-0-stepstart
        model, loader = build_model(), make_loader()
    for step, batch in enumerate(loader):
        with capture.step(step):                  # train-N-stepstart -> train-N-stepend
            loss = model(batch)
            loss.backward()
            optimizer.step()
    with capture.mode_change("train", step, "eval"):  # train-N-stepend -> eval-0-stepstart
        model.eval()
    for step, batch in enumerate(val_loader):
        with capture.step(step, mode="eval"):
            model(batch)
    with capture.post_hook_close():               # prestepzero-*-end -> posthookclose-*-end
        save_checkpoint(model)

Any other pair of boundaries goes through ``capture.interval((mode, step, phase), (mode, step, phase))``.
Every helper yields a :class:`CapturedInterval` whose ``path`` is the stats directory once the block ends.

Only the calling thread is profiled (both cProfile and pyinstrument hook one thread), and only one
interval may be open per thread at a time. A profiler that something else started is not detected.
"""

from __future__ import annotations

import cProfile
import json
import operator
import os
import pstats
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

from pyinstrument import Profiler as PyinstrumentProfiler
from pyinstrument.renderers import JSONRenderer

from proflake.errors import NestedCaptureError, UnknownNameError, UsageError
from proflake.modes import PythonProfileModes, StepPhase, parse_mode, parse_phase

CPROFILE = "cprofile"
PYINSTRUMENT = "pyinstrument"
PROFILER_NAMES = (CPROFILE, PYINSTRUMENT)

CPROFILE_FILE = "python_stats"
PYINSTRUMENT_JSON_FILE = "python_stats.json"
PYINSTRUMENT_HTML_FILE = "python_stats.html"

NODE_ID_ENV = "PROFLAKE_NODE_ID"

# smdebug multiplies time.time() by this int and formats the float with str(); so do we.
_MICROS_PER_SECOND = 1000000
_PYINSTRUMENT_FAILED_HTML = "An error occurred during profiling!"

Step = int | Literal["*"]
BoundaryLike = tuple[str | PythonProfileModes, int | str, str | StepPhase]


class Boundary(NamedTuple):
    """One end of an interval, normalised. A step of ``"*"`` means before step 0 / until the end."""

    mode: PythonProfileModes
    step: Step
    phase: StepPhase

    def label(self, time_us: float) -> str:
        """This end's part of a directory name, e.g. ``train-3-stepstart-1596585376012363.8``."""
        return f"{self.mode.label}-{self.step}-{self.phase.label}-{float(time_us)}"


def boundary(value: BoundaryLike | Boundary) -> Boundary:
    """Normalise ``(mode, step, phase)``; modes and phases in any spelling parse_mode/parse_phase take."""
    try:
        mode, step, phase = value
    except (TypeError, ValueError):
        raise UsageError(f"an interval boundary is (mode, step, phase), got {value!r}") from None
    return Boundary(parse_mode(mode), _step(step), parse_phase(phase))


def _step(step: object) -> Step:
    if step == "*":
        return "*"
    # bool is an int, but True as a step number is surely a mistake.
    if not isinstance(step, bool):
        try:
            number = operator.index(step)  # type: ignore[arg-type]  # accepts numpy/torch integer scalars
        except TypeError:
            pass
        else:
            if number >= 0:
                return number
    raise UsageError(f"a step is a non-negative integer or '*', got {step!r}")


def stats_dir_name(
    start: BoundaryLike | Boundary, start_time_us: float, end: BoundaryLike | Boundary, end_time_us: float
) -> str:
    """The directory name smdebug gives an interval, e.g.
    ``train-3-stepstart-1596585376012363.8_train-3-stepend-1596585376098765.2``."""
    return f"{boundary(start).label(start_time_us)}_{boundary(end).label(end_time_us)}"


def default_node_id() -> str:
    """``$PROFLAKE_NODE_ID`` if set, else smdebug's fallback outside SageMaker: ``{pid}-{hostname}``
    with underscores turned into dashes (so a node id never contains the ``_`` that splits intervals)."""
    from_env = os.environ.get(NODE_ID_ENV, "").strip()
    if from_env:
        return from_env
    return f"{os.getpid()}-{socket.gethostname()}".replace("_", "-")


@dataclass
class CapturedInterval:
    """What an open interval will be written as; ``path`` and ``end_time_us`` are set when it closes."""

    start: Boundary
    end: Boundary
    start_time_us: float
    end_time_us: float | None = None
    path: Path | None = None


class _Recorder(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def write(self, stats_dir: Path) -> None: ...


class _CProfileRecorder:
    def __init__(self) -> None:
        self._profile = cProfile.Profile()

    def start(self) -> None:
        self._profile.enable()

    def stop(self) -> None:
        self._profile.disable()

    def write(self, stats_dir: Path) -> None:
        pstats.Stats(self._profile).dump_stats(stats_dir / CPROFILE_FILE)


class _PyinstrumentRecorder:
    def __init__(self, sample_interval: float, description: str) -> None:
        self._profiler = PyinstrumentProfiler(interval=sample_interval)
        self._description = description

    def start(self) -> None:
        # Without a description pyinstrument titles every report "Profile at capture.py:<line>".
        self._profiler.start(target_description=self._description)

    def stop(self) -> None:
        self._profiler.stop()

    def write(self, stats_dir: Path) -> None:
        try:
            session = self._profiler.last_session
            if session is None:
                raise ValueError("pyinstrument recorded no session")
            # Render both before writing either, so a failure never leaves a json without its html.
            json_text = JSONRenderer().render(session)
            html_text = self._profiler.output_html()
        except Exception:
            # smdebug catches pyinstrument's sporadic UnboundLocalError/AssertionError this way; readers
            # downstream must cope with a null root frame, so writing one is more faithful than failing.
            json_text, html_text = json.dumps({"root_frame": None}), _PYINSTRUMENT_FAILED_HTML
        (stats_dir / PYINSTRUMENT_JSON_FILE).write_text(json_text, encoding="utf-8")
        (stats_dir / PYINSTRUMENT_HTML_FILE).write_text(html_text, encoding="utf-8")


# cProfile and pyinstrument both install the thread's profile hook, so a second interval opened on the
# same thread, by any Capture, would silently take over the first one's hook.
_open_interval = threading.local()


class Capture:
    """Writes one node's profiled intervals under ``{base_dir}/framework/{framework}/{profiler}/{node_id}``.

    ``clock`` returns seconds since the epoch like ``time.time``; tests inject it to get exact names.
    ``sample_interval`` is pyinstrument's sampling period in seconds (cProfile ignores it).
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        *,
        framework: str = "pytorch",
        profiler: str = CPROFILE,
        node_id: str | None = None,
        clock: Callable[[], float] = time.time,
        sample_interval: float = 0.001,
    ) -> None:
        name = profiler.strip().lower()
        if name not in PROFILER_NAMES:
            raise UnknownNameError("profiler", profiler, PROFILER_NAMES)
        self.base_dir = Path(base_dir)
        self.framework = _path_component("framework", framework)
        self.profiler = name
        self.node_id = _path_component("node id", default_node_id() if node_id is None else node_id)
        self.clock = clock
        self.sample_interval = sample_interval

    @property
    def node_dir(self) -> Path:
        return self.base_dir / "framework" / self.framework / self.profiler / self.node_id

    @contextmanager
    def interval(
        self, start: BoundaryLike | Boundary, end: BoundaryLike | Boundary
    ) -> Iterator[CapturedInterval]:
        """Profile the with-block and write its stats directory when the block ends, even if it raises."""
        start_b, end_b = boundary(start), boundary(end)
        already_open = getattr(_open_interval, "capture", None)
        if already_open is not None:
            raise NestedCaptureError(
                f"cannot open {start_b.mode.label}-{start_b.step} while {already_open.profiler} is still "
                f"profiling node {already_open.node_id} on this thread; profilers cannot nest, "
                "close the outer interval first"
            )
        recorder = self._recorder(f"{self.node_id} {start_b.mode.label}-{start_b.step}-{start_b.phase.label}")
        _open_interval.capture = self
        try:
            # Same order as smdebug: the clock is read outside the profiled span at both ends.
            captured = CapturedInterval(start_b, end_b, self.clock() * _MICROS_PER_SECOND)
            recorder.start()
            try:
                yield captured
            finally:
                recorder.stop()
                captured.end_time_us = self.clock() * _MICROS_PER_SECOND
                captured.path = self._write(recorder, captured)
        finally:
            _open_interval.capture = None

    def pre_step_zero(
        self, end_mode: str | PythonProfileModes = "train"
    ) -> AbstractContextManager[CapturedInterval]:
        """From the start of the script to step 0: ``prestepzero-*-start`` -> ``{end_mode}-0-stepstart``."""
        return self.interval(("prestepzero", "*", "start"), (end_mode, 0, "stepstart"))

    def step(
        self, step: int, mode: str | PythonProfileModes = "train"
    ) -> AbstractContextManager[CapturedInterval]:
        """One step: ``{mode}-{step}-stepstart`` -> ``{mode}-{step}-stepend``."""
        return self.interval((mode, step, "stepstart"), (mode, step, "stepend"))

    def mode_change(
        self,
        from_mode: str | PythonProfileModes,
        last_step: int,
        to_mode: str | PythonProfileModes,
        next_step: int = 0,
    ) -> AbstractContextManager[CapturedInterval]:
        """Between two modes, e.g. training into evaluation: ``train-N-stepend`` -> ``eval-0-stepstart``."""
        return self.interval((from_mode, last_step, "stepend"), (to_mode, next_step, "stepstart"))

    def post_hook_close(self) -> AbstractContextManager[CapturedInterval]:
        """After the hook closes until the script ends: ``prestepzero-*-end`` -> ``posthookclose-*-end``.

        smdebug really labels the start mode ``prestepzero`` here; readers rely on that, so it is kept."""
        return self.interval(("prestepzero", "*", "end"), ("posthookclose", "*", "end"))

    def _recorder(self, description: str) -> _Recorder:
        if self.profiler == CPROFILE:
            return _CProfileRecorder()
        return _PyinstrumentRecorder(self.sample_interval, description)

    def _write(self, recorder: _Recorder, captured: CapturedInterval) -> Path:
        assert captured.end_time_us is not None
        name = stats_dir_name(captured.start, captured.start_time_us, captured.end, captured.end_time_us)
        stats_dir = self.node_dir / name
        try:
            stats_dir.mkdir(parents=True)
        except FileExistsError:
            # Only a clock that did not move or two writers sharing a node id get here; overwriting
            # would silently lose one of the two profiles.
            raise UsageError(
                f"stats directory {stats_dir} already exists; "
                f"is another writer using node id {self.node_id!r}?"
            ) from None
        recorder.write(stats_dir)
        return stats_dir


def _path_component(kind: str, value: str) -> str:
    # These become single directory names that readers split on '/'.
    if not value or value in (".", "..") or "/" in value or os.sep in value:
        raise UsageError(f"{kind} must be a single non-empty directory name, got {value!r}")
    return value
