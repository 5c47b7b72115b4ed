"""What ``proflake check`` reports: one finding per damage, each a sentence with its remedy."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Finding:
    kind: str
    message: str  # one sentence: the damage and the remedy
    repaired: bool = False

    def line(self) -> str:
        return f"{'repaired' if self.repaired else 'damage'}: {self.kind}: {self.message}"


@dataclass
class CheckReport:
    store: str
    findings: list[Finding] = field(default_factory=list)
    reingested: list[str] = field(default_factory=list)
    # The store's schema version, this release's, the pending migrations and the history (SchemaState.to_dict).
    schema: dict = field(default_factory=dict)
    migrated: list[dict] = field(default_factory=list)  # migrations --repair applied

    def schema_line(self) -> str:
        """The schema version in a sentence: current, or which migrations are pending and what applies them."""
        if not self.schema:
            return ""
        version, current, pending = self.schema["schema_version"], self.schema["current_version"], self.schema["pending"]
        applied = f" (migrated by this run: {', '.join(str(m['version']) for m in self.migrated)})" if self.migrated else ""
        if not pending:
            return f"schema version {version}, this release's{applied}"
        return (f"schema version {version}; this release's is {current}: migration(s) {', '.join(map(str, pending))} "
                "pending, applied by the next ingest or 'proflake check --repair' (reads work meanwhile)")

    @property
    def ok(self) -> bool:
        return all(f.repaired for f in self.findings)

    def to_dict(self) -> dict:
        return {"store": self.store, "ok": self.ok, "reingested": self.reingested, "schema": self.schema, "migrated": self.migrated,
                "findings": [{"kind": f.kind, "message": f.message, "repaired": f.repaired} for f in self.findings]}
