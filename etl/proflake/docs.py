"""Markdown for the reference pages, generated from the declarations so the docs cannot drift.

docs/reference/*.md hold cog blocks that call these functions; ``bin/docs`` regenerates the pages and the
test suite runs ``cog --check`` on them. Tables come from schemas/*.json, views from ``proflake.views``.
"""

from __future__ import annotations

from collections.abc import Sequence

from proflake.schema import ALL_TABLES, Column, table_spec
from proflake.views import VIEWS


def tables_markdown() -> str:
    """Every table of the store: the interval keys once, then each table's own columns."""
    keys = table_spec("interval_keys")
    key_names = {c.name for c in keys.columns}
    out = [f"**Interval keys** (lead `intervals`, repeated on every fact row). {keys.description}", ""]
    out += _column_table(keys.columns)
    for name in ALL_TABLES:
        spec = table_spec(name)
        lead = "Columns: the interval keys, then:" if key_names <= set(spec.column_names) else "Columns:"
        out += ["", f"### `{name}`", "", f"{spec.description} {lead}", ""]
        out += _column_table([c for c in spec.columns if c.name not in key_names])
    return "\n".join(out) + "\n"


def views_markdown() -> str:
    """Every convenience view: what it answers, then its columns."""
    out: list[str] = []
    for v in VIEWS:
        # Descriptions link queries/ from the repository's top; the page lives two folders down.
        out += [f"### `{v.name}`", "", v.description.replace("](queries/", "](../../queries/"), ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{n}` | {t} | {m} |" for n, t, m in v.columns]
        out.append("")
    return "\n".join(out)


def _column_table(columns: Sequence[Column]) -> list[str]:
    rows = ["| column | type | null | meaning |", "|---|---|---|---|"]
    for c in columns:
        rows.append(f"| `{c.name}` | {c.type_name} | {'yes' if c.nullable else 'no'} | {c.description} |")
    return rows
