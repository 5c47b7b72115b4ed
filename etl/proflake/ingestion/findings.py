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

    @property
    def ok(self) -> bool:
        return all(f.repaired for f in self.findings)

    def to_dict(self) -> dict:
        return {"store": self.store, "ok": self.ok, "reingested": self.reingested,
                "findings": [{"kind": f.kind, "message": f.message, "repaired": f.repaired} for f in self.findings]}
