"""smdebug-compatible analysis classes, answered from a proflake store.

A notebook written for ``smdebug.profiler.analysis.python_profile_analysis`` keeps working when only
its import line changes::

    from proflake import cProfileAnalysis, PythonProfileModes, StepPhase, Metrics

    analysis = cProfileAnalysis(local_profile_dir="/tmp/python_stats")
    stats = analysis.fetch_profile_stats_by_step(5, mode=PythonProfileModes.TRAIN)
    stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=10)

Where the data comes from:

* ``s3_path``: that prefix is ingested (incrementally) into the store; ``local_profile_dir`` is then
  ignored (smdebug used it as a download folder; proflake reads S3 directly).
* else ``local_profile_dir``: that folder is ingested incrementally, in any layout smdebug's reader
  takes (a job's folder, its ``framework/`` folder, a profiler folder wherever it lies); one that does
  not exist raises ``MissingFolderError`` (a ``SourceError`` and an ``AssertionError``). Left at
  smdebug's default (``/tmp/python_stats``), it is used only when it exists and no ``store`` was given:
  ``cProfileAnalysis(store=...)`` alone queries the store as it is.
* ``store`` (default: ``$PROFLAKE_STORE``, else ``proflake/smdebug-store`` in the user's cache folder,
  e.g. ``~/.cache``) is where the rows go and where the questions are answered.

When a source was given, every question sees only the stats files below that source, exactly the files
smdebug would have read, however many other jobs the store holds. Without a source the store is queried
as it is (pass ``job=`` when it holds several jobs).

``refresh_stats=True`` (every method's default, as in smdebug) lists the source again; only when that
listing shows a new or changed stats file is it ingested (proflake.ingestion.probe), so an unchanged job
costs a listing per call, and a question asked before is answered from the view's kept answers.
``refresh_stats=False`` reuses the current view.

Differences from smdebug, all deliberate (docs/smdebug-compatibility.md says why, for each):

* ``fetch_profile_stats_by_time`` also matches an interval that contains the whole window.
* ``fetch_profile_stats_by_job_phase`` aggregates every interval of a phase (smdebug kept the last mode
  pair's), files the post-hook-close interval under finalization (smdebug: initialization), leaves out
  a phase no interval falls in but always returns ``training_loop`` (as smdebug), adds ``whole_job``
  when an interval spans the whole job, and is offered by PyinstrumentAnalysis too, with
  ``fetch_profile_stats_by_training_phase``.
* ``cProfileStats.get_function_stats`` returns a real DataFrame with five columns.
* An unknown mode, phase or node id raises ``proflake.errors.UnknownNameError`` (a ValueError) instead
  of silently matching nothing; ``node_id="all"`` and ``node_id=None`` aggregate every node.
* ``list_profile_stats`` with no stats returns an empty DataFrame with the twelve columns (smdebug: no
  columns), after printing smdebug's message.
* ``python_profile_stats`` is a read-only property (a fresh list at each read).
* Objects made for the same source and store in one process share one view of the store: a refresh
  by one is seen by the others (smdebug objects each kept their own list).
* The view keeps its answers until the data changes: asked again, a fetch is answered without a query
  (each caller still gets its own ``pstats.Stats``).
* With ``s3_path``, nothing is downloaded: ``stats_path`` is the ``s3://`` URI.
* A roll-up's ``cProfileStats`` build their ``pstats.Stats`` when first used.
* ``PythonProfileAnalysis`` itself cannot be made: use one of the two profilers' classes.
* Without ``store=``, the rows go to a store in the user's cache folder.

pandas is imported only by the methods that return DataFrames; without it they raise
``MissingExtraError`` (a ModuleNotFoundError) naming ``pip install 'proflake[pandas]'``.
"""

from __future__ import annotations

from proflake.modes import Metrics, PythonProfileModes, StepPhase
from proflake.smdebug.analysis import (
    NO_STATS_FOR_INTERVAL,
    NO_STATS_FOUND,
    PythonProfileAnalysis,
    default_store,
)
from proflake.smdebug.profilers import PyinstrumentAnalysis, cProfileAnalysis
from proflake.smdebug.stats import (
    FUNCTION_STATS_COLUMNS,
    LIST_COLUMNS,
    PyinstrumentStepStats,
    StepPythonProfileStats,
    cProfileFunctionStats,
    cProfileStats,
)

__all__ = [
    "FUNCTION_STATS_COLUMNS",
    "LIST_COLUMNS",
    "NO_STATS_FOR_INTERVAL",
    "NO_STATS_FOUND",
    "Metrics",
    "PyinstrumentAnalysis",
    "PyinstrumentStepStats",
    "PythonProfileAnalysis",
    "PythonProfileModes",
    "StepPhase",
    "StepPythonProfileStats",
    "cProfileAnalysis",
    "cProfileFunctionStats",
    "cProfileStats",
    "default_store",
]
