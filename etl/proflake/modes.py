"""smdebug's vocabulary for when a profiled interval starts and ends.

A stats directory name records, for both ends of an interval, a mode (train, eval, ...), a step and a
phase of that step. smdebug spells modes one way in directory names (``prestepzero``) and another way
in its enums (``PRE_STEP_ZERO``); users type either, in any case, so both are accepted everywhere.
"""

from __future__ import annotations

from enum import Enum, IntEnum

from proflake.errors import UnknownNameError


class PythonProfileModes(IntEnum):
    """Training modes, numbered as in smdebug so pickled or compared values keep meaning."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
    PRE_STEP_ZERO = 5
    POST_HOOK_CLOSE = 6

    @property
    def label(self) -> str:
        """The spelling smdebug writes into directory names, e.g. ``prestepzero``."""
        return _MODE_LABELS[self]


class StepPhase(Enum):
    """Where inside a step profiling started or stopped; the value is the directory-name spelling."""

    START = "start"
    STEP_START = "stepstart"
    FORWARD_PASS_END = "forwardpassend"
    STEP_END = "stepend"
    END = "end"

    @property
    def label(self) -> str:
        return self.value


class Metrics(Enum):
    """cProfile metrics to sort by; the value is the ``pstats`` sort key, as in smdebug."""

    TOTAL_TIME = "tottime"
    CUMULATIVE_TIME = "cumtime"
    PRIMITIVE_CALLS = "pcalls"
    TOTAL_CALLS = "ncalls"


_MODE_LABELS = {
    PythonProfileModes.TRAIN: "train",
    PythonProfileModes.EVAL: "eval",
    PythonProfileModes.PREDICT: "predict",
    PythonProfileModes.GLOBAL: "global",
    PythonProfileModes.PRE_STEP_ZERO: "prestepzero",
    PythonProfileModes.POST_HOOK_CLOSE: "posthookclose",
}

MODE_LABELS: tuple[str, ...] = tuple(_MODE_LABELS.values())
PHASE_LABELS: tuple[str, ...] = tuple(p.value for p in StepPhase)


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "").replace("-", "")


_MODE_BY_NAME = {_normalise(m.name): m for m in PythonProfileModes}
_MODE_BY_NAME.update({label: m for m, label in _MODE_LABELS.items()})
_PHASE_BY_NAME = {_normalise(p.name): p for p in StepPhase}
_PHASE_BY_NAME.update({p.value: p for p in StepPhase})


def parse_mode(value: str | int | PythonProfileModes) -> PythonProfileModes:
    """Accept ``train``, ``TRAIN``, ``PythonProfileModes.TRAIN``, ``pre_step_zero``, ``prestepzero``, ...
    and the enum's ints (``1`` = TRAIN), as smdebug's IntEnum compares; never a bool."""
    if isinstance(value, PythonProfileModes):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in PythonProfileModes._value2member_map_:
        return PythonProfileModes(value)
    if isinstance(value, str):
        mode = _MODE_BY_NAME.get(_normalise(value.rpartition(".")[2]))
        if mode is not None:
            return mode
    raise UnknownNameError("mode", str(value), MODE_LABELS)


def parse_phase(value: str | StepPhase) -> StepPhase:
    """Accept ``stepstart``, ``STEP_START``, ``StepPhase.STEP_START``, ``step_start``, ..."""
    if isinstance(value, StepPhase):
        return value
    if isinstance(value, str):
        phase = _PHASE_BY_NAME.get(_normalise(value.rpartition(".")[2]))
        if phase is not None:
            return phase
    raise UnknownNameError("phase", str(value), PHASE_LABELS)


def mode_label(value: str | PythonProfileModes) -> str:
    return parse_mode(value).label


def phase_label(value: str | StepPhase) -> str:
    return parse_phase(value).label
