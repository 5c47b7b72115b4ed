"""Result tables for people at a terminal: fitted to its width, numbers formatted for reading.

Times in seconds get a unit and three significant digits (``1.04 s``, ``3.73 ms``, ``12.0 µs``), counts
are grouped (``2,722``), timestamps are ISO 8601 in UTC with the offset, to the millisecond. When the
natural widths do not fit, the widest text columns (the function, a path) are shortened in the middle,
keeping the end (file, line and function name), down to MIN_TEXT characters; columns that still do not
fit are left out, the least important first (``priority`` names the most important first; by default the
table's order, so from the right), and named. Messages under a table are wrapped to the width. ``rich`` draws the table; it is imported only here.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from proflake.numbers import count, p_value, percent, printable, seconds
from proflake.render.output import iso_timestamp, timestamps

if TYPE_CHECKING:
    import pyarrow as pa

GAP = 2  # spaces between two columns
MIN_TEXT = 24  # a shortened text column keeps at least this many characters
# Float columns holding a duration in seconds (plus any name ending in _s or _seconds).
SECONDS = frozenset({"tottime", "cumtime", "self_time", "total_time", "await_time", "seconds"})
SECONDS_OF_A_DIFF = frozenset({"base_self", "head_self", "self_change", "self_ci_low", "self_ci_high", "base_cum",
                               "head_cum", "cum_change", "cum_ci_low", "cum_ci_high"})
# Float columns holding a ratio (shown as a percentage), a p-value, or a mean count per sample.
RATIOS = frozenset({"share_of_change"})
P_VALUES = frozenset({"p_value", "p_adjusted", "cum_p_value"})
MEAN_COUNTS = frozenset({"base_calls", "head_calls"})
# Float columns holding seconds since the epoch, shown as timestamps.
EPOCH_SECONDS = frozenset({"session_start_time"})


@dataclass
class TerminalTable:
    """A table drawn for a terminal, and what it left out to fit."""

    text: str
    dropped: list[str] = field(default_factory=list)  # columns that did not fit, in table order


def draw(table: pa.Table, width: int, *, color: bool = False, priority: Sequence[str] = ()) -> TerminalTable:
    """``table`` drawn to fit ``width`` characters (every line at most that long). Columns that do not fit
    are left out by importance: those named in ``priority`` (most important first) stay before the others,
    which go from the right; what stays keeps the table's order."""
    import pyarrow as pa

    names = list(table.column_names)
    cells = [_column_cells(name, f.type, col) for name, f, col in zip(names, table.schema, table.columns)]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(names, cells)]
    text_columns = [
        i for i, f in enumerate(table.schema) if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    ]
    headers = list(names)

    def total() -> int:
        return sum(widths) + GAP * (len(widths) - 1)

    # 1. Headers longer than their values wrap at their underscores ("start_mode" over two lines).
    if total() > width:
        for i, name in enumerate(names):
            wrapped = _wrap_header(name)
            longest_value = max((len(c) for c in cells[i]), default=0)
            narrow = max(longest_value, max(len(part) for part in wrapped.split("\n")))
            if narrow < widths[i]:
                headers[i], widths[i] = wrapped, narrow
    # 2. The widest text columns are shortened in the middle, down to MIN_TEXT.
    while total() > width:
        shrinkable = [i for i in text_columns if widths[i] > MIN_TEXT]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] = max(MIN_TEXT, widths[widest] - (total() - width))
    # 3. Columns that still do not fit are left out, the least important first (the most important stays).
    rank = {name: i for i, name in enumerate(priority)}
    importance = sorted(range(len(names)), key=lambda i: (rank.get(names[i], len(rank)), i))
    keep = list(range(len(names)))
    while len(keep) > 1 and sum(widths[i] for i in keep) + GAP * (len(keep) - 1) > width:
        keep.remove(importance.pop())
    dropped = [n for i, n in enumerate(names) if i not in keep]
    return TerminalTable(_draw(keep, headers, cells, widths, numeric, width, color), dropped)


def fit_message(text: str, width: int) -> str:
    """A message for under a table, wrapped at spaces to ``width`` characters (lines after the first
    indented by two), so that no line is wider than the terminal."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width=max(MIN_TEXT, width), subsequent_indent="  ", break_on_hyphens=False)) or text


def _draw(keep, headers, cells, widths, numeric, width: int, color: bool) -> str:
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, GAP - 1),
        header_style="bold" if color else "", show_lines=False,
    )
    for i in keep:
        justify: Literal["right", "left"] = "right" if numeric[i] else "left"
        table.add_column(headers[i], justify=justify, no_wrap=True, width=widths[i], min_width=widths[i])
    rows = len(cells[0]) if cells else 0
    for r in range(rows):
        table.add_row(*(shorten_middle(cells[i][r], widths[i]) for i in keep))
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, force_terminal=color, color_system="standard" if color else None,
        no_color=not color, highlight=False, emoji=False, markup=False, legacy_windows=False,
    )
    console.print(table, crop=True, overflow="ignore")
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines) + "\n"


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, ``…`` in place of its middle. The end (file, line and
    function) is kept whole; of a path, the first folder and whole trailing folders are kept when they
    fit: ``/usr/…/keras/engine/base_layer.py:763(__call__)``."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = text[: text.find("/", 1) + 1] if text.startswith("/") and text.find("/", 1) > 0 else ""
    if len(head) > (width - 1) // 4:
        head = text[: (width - 1) // 4]
    budget = width - 1 - len(head)
    tail = text[len(text) - budget :]
    cut = tail.find("/")
    if 0 <= cut < budget // 3:  # start the kept end at a folder, if that costs little
        tail = tail[cut:]
    return head + "…" + tail


def _wrap_header(name: str) -> str:
    return name.replace("_", "\n") if "_" in name else name


def _column_cells(name: str, type_: pa.DataType, column) -> list[str]:
    import pyarrow as pa

    if pa.types.is_timestamp(type_):
        return [_timestamp(v) for v in timestamps(column)]
    values = column.to_pylist()
    if pa.types.is_floating(type_):
        if name in EPOCH_SECONDS:
            return [_timestamp(dt.datetime.fromtimestamp(v, dt.timezone.utc)) if v is not None else "" for v in values]
        if name in SECONDS or name in SECONDS_OF_A_DIFF or name.endswith(("_s", "_seconds")):
            return [seconds(v) for v in values]
        if name in RATIOS or name.endswith("_ratio"):
            return [percent(v) for v in values]
        if name in P_VALUES:
            return [p_value(v) for v in values]
        if name in MEAN_COUNTS:
            return [count(v) for v in values]
        return [_float(v) for v in values]
    if pa.types.is_integer(type_):
        plain = name == "lineno" or name.endswith(("_step", "_id", "step"))
        return ["" if v is None else str(v) if plain else f"{v:,}" for v in values]
    if pa.types.is_boolean(type_):
        return ["" if v is None else "yes" if v else "no" for v in values]
    return ["" if v is None else printable(str(v)) for v in values]


def _timestamp(value: dt.datetime | None) -> str:
    return iso_timestamp(value, "milliseconds") or ""


def _float(value: float | None) -> str:
    if value is None:
        return ""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e18:
        return str(int(value))  # microsecond timestamps and other whole numbers, in full
    if abs(value) >= 1e6:
        return f"{value:.1f}"
    return f"{value:.6g}"


def draw_errors(table: pa.Table, width: int) -> str:
    """The quarantine for a terminal, one block per file, so the reason is never cut or left out: its
    kind, attempts and last failure; the file (shortened in the middle to the width); the reason,
    wrapped to the width."""
    import textwrap

    blocks = []
    for row in table.to_pylist():
        head = [printable(str(row.get("error_kind") or ""))]
        if row.get("attempts") is not None:
            head.append(f"{count(row['attempts'])} attempt{'' if row['attempts'] == 1 else 's'}")
        if row.get("last_seen") is not None:
            head.append(f"last {_timestamp(row['last_seen'])}")
        if row.get("closed_at") is not None:
            head.append(f"closed {_timestamp(row['closed_at'])}")
        lines = ["  ".join(head)]
        if row.get("source_uri"):
            lines.append("  " + shorten_middle(printable(str(row["source_uri"])), max(MIN_TEXT, width - 2)))
        message = str(row.get("message") or "")
        if row.get("source_uri") and message.startswith(f"{row['source_uri']}: "):
            message = message[len(row["source_uri"]) + 2:]  # the file is on the line above
        message = printable(message)
        lines += textwrap.wrap(message, width=max(MIN_TEXT, width - 4), initial_indent="    ", subsequent_indent="    ",
                               break_long_words=True, break_on_hyphens=False)
        blocks.append("\n".join(line[:width] for line in lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")
