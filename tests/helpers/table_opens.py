"""Count the store's Delta table opens during a test: how tests pin that a command opens each table once."""

from __future__ import annotations

import pytest
from proflake.store.store import Store


def counted_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tables ``Store.delta`` opens from now to the test's end, in order."""
    opens: list[str] = []
    delta = Store.delta

    def counting(self: Store, name: str, version: int | None = None):  # noqa: ANN202 - Store.delta's
        opens.append(name)
        return delta(self, name, version)

    monkeypatch.setattr(Store, "delta", counting)
    return opens
