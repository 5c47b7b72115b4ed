"""proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL.

Native API: ``Profiles`` (fetch methods returning Arrow-backed ``FetchResult``s) and ``ingest``.
smdebug-compatible API: ``cProfileAnalysis``, ``PyinstrumentAnalysis``, ``PythonProfileModes``,
``StepPhase`` and ``Metrics``, so a notebook only changes its import line.
"""

from etl.api import FetchResult, Profiles
from etl.compat import (
    PyinstrumentAnalysis,
    PyinstrumentStepStats,
    cProfileAnalysis,
    cProfileFunctionStats,
    cProfileStats,
)
from etl.errors import ProflakeError
from etl.ingest import IngestReport, ingest
from etl.modes import Metrics, PythonProfileModes, StepPhase
from etl.store import Store

__all__ = [
    "FetchResult",
    "IngestReport",
    "Metrics",
    "Profiles",
    "ProflakeError",
    "PyinstrumentAnalysis",
    "PyinstrumentStepStats",
    "PythonProfileModes",
    "StepPhase",
    "Store",
    "cProfileAnalysis",
    "cProfileFunctionStats",
    "cProfileStats",
    "ingest",
]
