"""proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL.

Native API: ``Profiles`` (fetch methods returning Arrow-backed ``FetchResult``s) and ``ingest``.
smdebug-compatible API: ``cProfileAnalysis``, ``PyinstrumentAnalysis``, ``PythonProfileModes``,
``StepPhase`` and ``Metrics``, so a notebook only changes its import line.

Every name is imported on first use, so ``import proflake`` costs almost nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proflake._lazy import lazy_exports

_EXPORTS = {
    "FetchResult": "proflake.query.profiles",
    "Profiles": "proflake.query.profiles",
    "IngestReport": "proflake.ingestion.batch",
    "ingest": "proflake.operations",
    "compact": "proflake.operations",
    "Store": "proflake.store.store",
    "Report": "proflake.render.report",
    "build_report": "proflake.pages",
    "build_diff_report": "proflake.pages",
    "build_trend_report": "proflake.pages",
    "ProflakeError": "proflake.errors",
    "Metrics": "proflake.modes",
    "PythonProfileModes": "proflake.modes",
    "StepPhase": "proflake.modes",
    "PyinstrumentAnalysis": "proflake.smdebug.compat",
    "PyinstrumentStepStats": "proflake.smdebug.compat",
    "cProfileAnalysis": "proflake.smdebug.compat",
    "cProfileFunctionStats": "proflake.smdebug.compat",
    "cProfileStats": "proflake.smdebug.compat",
}
__all__ = [
    "FetchResult",
    "IngestReport",
    "Metrics",
    "Profiles",
    "ProflakeError",
    "PyinstrumentAnalysis",
    "PyinstrumentStepStats",
    "PythonProfileModes",
    "Report",
    "StepPhase",
    "Store",
    "build_diff_report",
    "build_report",
    "build_trend_report",
    "cProfileAnalysis",
    "cProfileFunctionStats",
    "cProfileStats",
    "compact",
    "ingest",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from proflake.errors import ProflakeError
    from proflake.ingestion.batch import IngestReport
    from proflake.modes import Metrics, PythonProfileModes, StepPhase
    from proflake.operations import compact, ingest
    from proflake.query.profiles import FetchResult, Profiles
    from proflake.smdebug.compat import (
        PyinstrumentAnalysis,
        PyinstrumentStepStats,
        cProfileAnalysis,
        cProfileFunctionStats,
        cProfileStats,
    )
    from proflake.store.store import Store
