"""What ``proflake rebuild`` would delete: the store's intervals that do not come from the given source.

A rebuild is a full refresh of the whole store (``ingest(source, whole_store=True)``): one commit leaves
exactly what SOURCE holds. Because it deletes other sources' jobs, the CLI shows this plan first and
does nothing without ``--yes``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from proflake.ingestion.listing import source_prefix
from proflake.ingestion.manifest import Manifest
from proflake.sources.base import Source
from proflake.store.store import Store


@dataclass
class RebuildPlan:
    store: str
    source: str
    replaced: int = 0  # intervals from under SOURCE: parsed again
    deleted: Counter[str] = field(default_factory=Counter)  # job id -> intervals from elsewhere, deleted

    def lines(self) -> list[str]:
        """The plan as sentences, one per line, for a person to read before confirming."""
        out = [f"rebuild the store at {self.store!r} from {self.source}: its {self.replaced} interval(s) from there are parsed again"]
        if self.deleted:
            out.append(f"and {sum(self.deleted.values())} interval(s) from elsewhere are deleted, of {len(self.deleted)} job(s):")
            out += [f"  {job}: {count} interval(s)" for job, count in sorted(self.deleted.items())]
        else:
            out.append("nothing from elsewhere is deleted (the store holds only this source's files)")
        return out

    def to_dict(self) -> dict:
        return {"store": self.store, "source": self.source, "replaced_intervals": self.replaced,
                "deleted_intervals": dict(sorted(self.deleted.items()))}


def rebuild_plan(src: Source, store: Store) -> RebuildPlan:
    """Count what a rebuild of ``store`` from ``src`` keeps and deletes, without changing anything."""
    plan = RebuildPlan(store=store.location, source=src.uri)
    if not store.exists():
        return plan
    with Manifest(store) as manifest:  # counted by DuckDB: one row per job comes back
        for job_id, under, elsewhere in manifest.jobs_under(source_prefix(src)):
            plan.replaced += under
            if elsewhere:
                plan.deleted[job_id] += elsewhere
    return plan
