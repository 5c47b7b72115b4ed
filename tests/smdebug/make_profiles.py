"""Write python profiler stats with smdebug 1.0.34's own profiler classes (run with .venv-smdebug's python).

    python tests/smdebug/make_profiles.py OUT_DIR [analysis|scenarios ...]

``analysis``: the call sequence of smdebug's ``tests/profiler/core/test_python_profiler.py::
test_python_analysis`` (awslabs/sagemaker-debugger, Apache-2.0), copied step for step, for cProfile
(``cProfileTimer.TOTAL_TIME``) and pyinstrument, into ``OUT_DIR/analysis/framework/tensorflow/...``.

``scenarios``: more folders written by the same classes: two nodes, every cProfile timer (the default
profiler's three-timer cycle included), pyinstrument's own failure file ({"root_frame": null}), into
``OUT_DIR/scenarios/framework/pytorch/...``.

The files under tests/data/smdebug-1.0.34/ were made by this script (see the README there); the slow
test tier re-runs it in a fresh venv (tests/smdebug/make_venv.sh).
"""

import os
import sys
import time

# The committed files must lie in the past on any test machine's clock (the ported test ends a window at
# time.time()): the whole process runs SHIFT_S seconds in the past. Durations are unchanged.
SHIFT_S = float(os.environ.get("SMDEBUG_CLOCK_SHIFT_S", "0"))
if SHIFT_S:
    _real_time = time.time
    time.time = lambda: _real_time() - SHIFT_S

import smdebug.core.locations as _locations  # noqa: E402  # after the clock shift
from smdebug.core.utils import FRAMEWORK  # noqa: E402
from smdebug.profiler.python_profile_utils import PythonProfileModes, StepPhase  # noqa: E402
from smdebug.profiler.python_profiler import (  # noqa: E402
    PyinstrumentPythonProfiler,
    cProfileDefaultPythonProfiler,
    cProfilePythonProfiler,
    cProfileTimer,
)


# -- the functions of smdebug's test, same names and bodies ------------------------------------------
def pre_step_zero_function():
    time.sleep(0.0011)  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def start_end_step_function():
    time.sleep(0.0011)


def end_start_step_function():
    time.sleep(0.0011)


def between_modes_function():
    time.sleep(0.0011)


def eval_function():
    time.sleep(0.0011)


def post_hook_close_function():
    time.sleep(0.0011)


def time_function():
    time.sleep(0.0011)


def analysis_sequence(python_profiler):
    """test_python_analysis's local branch, verbatim."""
    python_profiler.start_profiling(StepPhase.START)
    pre_step_zero_function()
    python_profiler.stop_profiling(StepPhase.STEP_START, end_mode=PythonProfileModes.TRAIN, end_step=1)

    python_profiler.start_profiling(StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=1)
    start_end_step_function()
    python_profiler.stop_profiling(StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=1)

    python_profiler.start_profiling(StepPhase.STEP_END, start_mode=PythonProfileModes.TRAIN, start_step=1)
    end_start_step_function()
    python_profiler.stop_profiling(StepPhase.STEP_START, end_mode=PythonProfileModes.TRAIN, end_step=2)

    python_profiler.start_profiling(StepPhase.STEP_END, start_mode=PythonProfileModes.TRAIN, start_step=1)
    between_modes_function()
    python_profiler.stop_profiling(StepPhase.STEP_START, end_mode=PythonProfileModes.EVAL, end_step=1)

    python_profiler.start_profiling(StepPhase.STEP_START, start_mode=PythonProfileModes.EVAL, start_step=1)
    eval_function()
    python_profiler.stop_profiling(StepPhase.STEP_END, end_mode=PythonProfileModes.EVAL, end_step=1)

    python_profiler.start_profiling(StepPhase.STEP_END, start_mode=PythonProfileModes.EVAL, start_step=1)
    post_hook_close_function()
    python_profiler.stop_profiling(StepPhase.END)

    # NOTE (smdebug's): This needs to be profiled last for tests to pass.
    python_profiler.start_profiling(StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=2)
    time_function()
    python_profiler.stop_profiling(StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=2)


def train_loop(python_profiler, steps):
    """A hook's call sequence: pre-step-zero, steps start..end of TRAIN, then post-hook-close."""
    python_profiler.start_profiling(StepPhase.START)
    pre_step_zero_function()
    python_profiler.stop_profiling(StepPhase.STEP_START, end_mode=PythonProfileModes.TRAIN, end_step=steps[0])
    for step in steps:
        python_profiler.start_profiling(StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=step)
        start_end_step_function()
        python_profiler.stop_profiling(StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=step)
    python_profiler.start_profiling(StepPhase.STEP_END, start_mode=PythonProfileModes.TRAIN, start_step=steps[-1])
    post_hook_close_function()
    python_profiler.stop_profiling(StepPhase.END)


def analysis(out_dir):
    base = os.path.join(out_dir, "analysis")
    framework = FRAMEWORK.TENSORFLOW
    analysis_sequence(cProfilePythonProfiler(base, framework, cProfileTimer.TOTAL_TIME))
    analysis_sequence(PyinstrumentPythonProfiler(base, framework))


def scenarios(out_dir):
    base = os.path.join(out_dir, "scenarios")
    framework = FRAMEWORK.PYTORCH
    # smdebug names the node "{pid}-{host}" (or "{rank}-{host}" in a cluster); two processes, two nodes.
    for rank in (0, 1):  # as on SageMaker: "{rank}-{host from resourceconfig.json}"
        _locations.get_node_id = lambda rank=rank: f"{rank}-algo-1"
        train_loop(cProfilePythonProfiler(base, framework, cProfileTimer.CPU_TIME), [1, 2])
    _locations.get_node_id = lambda: "0-algo-2"
    # The default profiler cycles total, cpu, off-cpu time over steps 9, 10, 11.
    train_loop(cProfileDefaultPythonProfiler(base, framework), [9, 10, 11])
    train_loop(cProfilePythonProfiler(base, framework, cProfileTimer.OFF_CPU_TIME), [20])
    profiler = PyinstrumentPythonProfiler(base, framework)
    train_loop(profiler, [1, 2])
    # pyinstrument's failure file, written by smdebug's own except branch.
    profiler.start_profiling(StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=3)
    start_end_step_function()

    class Broken:  # the sporadic failure smdebug's except branch is for: pyinstrument asserts while rendering
        def root_frame(self):
            raise AssertionError

    profiler._profiler.stop()
    profiler._profiler.stop = lambda: None
    profiler._profiler.last_session = Broken()
    profiler.stop_profiling(StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=3)


if __name__ == "__main__":
    out = sys.argv[1]
    for what in sys.argv[2:] or ["analysis"]:
        {"analysis": analysis, "scenarios": scenarios}[what](out)
