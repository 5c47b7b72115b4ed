"""Every fetch method answered on Spark: ``SparkProfiles`` is ``Profiles`` with Spark as the engine.

    >>> from proflake.spark import SparkProfiles
    >>> profiles = SparkProfiles(spark, "s3://bucket/proflake-store")
    >>> profiles.by_step(5, mode="train", all_jobs=True).table     # the same pyarrow.Table as on DuckDB

The questions, their defaults and results are Profiles' own: only the engine changes. Each query runs
as its generated Spark SQL (queries/spark/, from queries/*.sql by proflake.spark.sqlgen) over the
store's committed snapshot, registered by ``proflake.spark.register``. Two DuckDB shortcuts are not
taken, since they only save time: roll-ups always sum the fact rows (never the pre-summed phase tables),
and caller edges are summed when first asked for.

Every query (the fetch methods', the listings', ``sql``'s) runs in UTC, whatever the session's time zone:
``spark.sql.session.timeZone`` is UTC while one runs and is put back afterwards (``tables.in_utc``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from proflake.query.profiles import Profiles
from proflake.spark import tables
from proflake.store.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkProfiles(Profiles):
    """Questions about one store, answered by ``spark`` over its committed snapshot at creation (or at
    the last ``refresh()``)."""

    def __init__(
        self,
        spark: SparkSession,
        store: Store | str | None = None,
        *,
        source_prefix: str | None = None,
        s3_scheme: str = "s3://",
    ) -> None:
        super().__init__(store, source_prefix=source_prefix)
        self.spark = spark
        self.s3_scheme = s3_scheme
        self._registered = False

    def connection(self):  # noqa: D102 - no DuckDB connection on this engine
        raise NotImplementedError("SparkProfiles answers on Spark; use Profiles for a DuckDB connection")

    def _ensure_registered(self) -> None:
        if not self._registered:
            with tables.in_utc(self.spark):
                tables.register(self.spark, self.store, s3_scheme=self.s3_scheme)
            self._registered = True

    def refresh(self) -> None:
        """Re-register the store's current snapshot, so the next question sees what was ingested since."""
        self._registered = False
        self._memo.clear()

    def _run(self, name: str, params: dict[str, Any]) -> pa.Table:
        self._ensure_registered()
        with tables.in_utc(self.spark):
            return tables.run(self.spark, name, params)

    def _select(self, query: str, params: dict[str, Any]) -> pa.Table:
        """The selected intervals, in the query's order: Spark's selections return interval ids (its tables
        have no row numbers), gathered here from the Arrow copy of intervals."""
        ids = self._run(query, params)["interval_row"]
        intervals = self._intervals()
        positions = self._memoised(
            ("positions",), lambda: {i: n for n, i in enumerate(intervals["interval_id"].to_pylist())}
        )
        return intervals.take(pa.array([positions[i] for i in ids.to_pylist()], pa.int64()))

    def _intervals(self) -> pa.Table:
        def load() -> pa.Table:
            self._ensure_registered()
            with tables.in_utc(self.spark):
                table = self.spark.sql("SELECT * FROM intervals").toArrow()
            return table.take(pc.sort_indices(table, [("interval_id", "ascending")]))

        return self._memoised(("intervals",), load)

    def _rollup_aside(self, selection: pa.Table, rollup: str, params: dict[str, Any]):
        return None  # summed when first asked for (FetchResult.callers)

    def _rollup_query(self, selection: pa.Table, rollup: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        starts = selection["start_time_us"]
        span = {
            "interval_ids": selection["interval_id"].to_pylist(),
            "min_start_time_us": pc.min(starts).as_py() if len(starts) else 0.0,
            "max_start_time_us": pc.max(starts).as_py() if len(starts) else -1.0,
        }
        return rollup, {**params, **span}

    def sql(self, query: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Spark SQL over the registered tables and views, in UTC; ``params`` bound by Spark as ``:name`` markers."""
        self._ensure_registered()
        with tables.in_utc(self.spark):
            return self.spark.sql(query, args=params or None).toArrow()

    def sql_schema(self) -> pa.Table:  # noqa: D102
        raise NotImplementedError("list the registered views with spark.catalog.listTables()")
