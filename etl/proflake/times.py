"""Points in time as users type them: seconds since the epoch, ISO 8601 text, or a ``datetime``.

proflake's times are UTC. An ISO 8601 text or a ``datetime`` without an offset is read as UTC (what the
tables show), not as the machine's local time.
"""

from __future__ import annotations

import datetime as dt

from proflake.errors import UsageError

TimeLike = float | int | str | dt.datetime | dt.date


def epoch_seconds(value: TimeLike) -> float:
    """``value`` as seconds since the epoch: a number as is; ``"1596585375"``; ``"2020-08-04T23:56:15Z"``,
    ``"2020-08-04 23:56:15.5+02:00"`` or ``"2020-08-04"`` (UTC when no offset); a ``datetime`` or ``date``."""
    if isinstance(value, bool):
        raise UsageError(f"{value!r} is not a time")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dt.datetime):
        return _aware(value).timestamp()
    if isinstance(value, dt.date):
        return _aware(dt.datetime(value.year, value.month, value.day)).timestamp()
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            return _aware(dt.datetime.fromisoformat(text)).timestamp()
        except ValueError:
            pass
    raise UsageError(
        f"{value!r} is not a time; give seconds since the epoch (1596585375.5), ISO 8601 "
        "(2020-08-04T23:56:15Z; UTC when it has no offset) or a datetime"
    )


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
