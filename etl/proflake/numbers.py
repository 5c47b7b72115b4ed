"""Numbers for people, one format everywhere proflake writes text (the terminal tables, the diff's lines,
the gate's verdicts): a duration with a unit and three significant digits (``1.04 s``, ``3.73 ms``,
``12.0 µs``), a ratio as a signed percentage with three significant digits and grouped thousands
(``+36.1%``, ``+19,352%``), counts grouped (``33,825``; a mean count per step keeps three significant
digits: ``0.25``), p-values with two (``0.0041``), times as ISO 8601 in UTC (``2020-08-04T23:56:15Z``).
Files for other programs (csv, json, parquet) keep the raw values. The pages' script has a port of these
rules (render/report/static/common.js); a browser test holds the two equal.
"""

from __future__ import annotations

import datetime as dt
import math
import re

# C0 and C1 control characters (escape sequences start with ESC, 0x1b, or CSI, 0x9b) and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def ranked(value: float) -> float:
    """``value`` rounded to 12 significant digits, to order by: sums of the same numbers added in another
    order (DuckDB adds in parallel; float addition is not associative) differ in their last bits, so two
    functions with equal totals would swap places from one fetch to the next. Rounded, they tie, and the
    name that breaks ties decides. Infinities and NaN are returned as they are. The SQL macro ``ranked``
    (queries/macros.sql) applies the same rule in the fetch queries and views."""
    return float(f"{value:.12g}") if math.isfinite(value) else value


def seconds(value: float | None) -> str:
    """A duration in seconds with a unit and three significant digits: ``1.04 s``, ``3.73 ms``, ``0``."""
    if value is None:
        return ""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if magnitude >= scale * 0.9995:
            return f"{three_digits(value / scale)} {unit}"
    return f"{three_digits(value / 1e-9)} ns"


def percent(ratio: float | None, *, sign: bool = True) -> str:
    """``ratio`` (0.361 = 36.1%) as a percentage with three significant digits: ``+36.1%``, ``-0.52%``,
    ``+19,352%``; ``""`` for None, ``new`` for a ratio that is not finite (nothing to compare with)."""
    if ratio is None:
        return ""
    if not math.isfinite(ratio):
        return "new"
    value = ratio * 100
    if value == 0:
        return "0%"
    text = f"{value:,.0f}" if abs(value) >= 99.95 else three_digits(value)
    return f"{'+' if sign and value > 0 else ''}{text}%"


def count(value: float | int | None) -> str:
    """A count grouped in thousands (``33,825``); a fractional mean count keeps three significant digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if not value.is_integer():
            return f"{value:,.0f}" if abs(value) >= 999.5 else f"{value:.3g}"
        value = int(value)
    return f"{value:,}"


def p_value(value: float | None) -> str:
    """A p-value with two significant digits (``0.0041``, ``0.31``, ``1``)."""
    if value is None or math.isnan(value):
        return ""
    return f"{value:.2g}"


def three_digits(value: float) -> str:
    """``value`` with three significant digits, for magnitudes below 1,000 (``1.04``, ``37.3``, ``512``)."""
    magnitude = abs(value)
    if magnitude >= 99.95:
        return f"{value:.0f}"
    if magnitude >= 9.995:
        return f"{value:.1f}"
    if magnitude >= 0.9995:
        return f"{value:.2f}"
    return f"{value:.3g}"


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: control characters (an escape sequence's ESC, a bell, a
    carriage return) shown as ``\\x1b`` and the like, a tab as a space, so a function name or a job id
    cannot set the window title, clear the screen or colour what follows."""
    text = text.replace("\t", " ")
    if not keep_newlines:
        text = text.replace("\n", "\\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def utc(moment: dt.datetime | float | None, *, timespec: str = "seconds") -> str:
    """A point in time (a ``datetime``, or seconds since the epoch) as ISO 8601 in UTC with a ``Z``:
    ``2020-08-04T23:56:15Z`` (``timespec`` as ``datetime.isoformat``: ``milliseconds`` keeps ``.123``)."""
    if moment is None:
        return ""
    if not isinstance(moment, dt.datetime):
        moment = dt.datetime.fromtimestamp(moment, dt.timezone.utc)
    elif moment.tzinfo is None:  # proflake's times are UTC (proflake.times)
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(timespec=timespec).replace("+00:00", "Z")
