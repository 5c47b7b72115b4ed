"""Count the store's Delta table opens and DuckDB databases during a test: how tests pin that a command
opens each table once and makes no database it does not need (~14 ms of CPU each)."""

from __future__ import annotations

import sys

import proflake.sql
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


def counted_databases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """For each DuckDB database ``proflake.sql.connect`` makes from now to the test's end, in order, the
    name of the function that asked for it (``Snapshot.__init__`` shows as ``__init__``)."""
    databases: list[str] = []
    connect = proflake.sql.duckdb.connect

    def counting(*args, **kwargs):  # noqa: ANN202 - duckdb.connect's
        databases.append(sys._getframe(2).f_code.co_name)  # proflake.sql.connect's caller
        return connect(*args, **kwargs)

    monkeypatch.setattr(proflake.sql.duckdb, "connect", counting)
    return databases
