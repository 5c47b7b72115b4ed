"""The intervals of plain files (proflake.sources.plain), as the listing takes them: planned by the
source, filed by proflake.layout.plain_interval, checked as a path's interval would be."""

from __future__ import annotations

from collections.abc import Callable

from proflake.errors import LayoutError
from proflake.layout import IntervalPath, plain_interval
from proflake.sources import SourceObject
from proflake.sources.plain import PlainFile


def is_utf8(text: str) -> bool:
    """Whether ``text`` (a path as the file system gave it) encodes as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a name the file system gave as undecodable bytes (surrogate escapes)
        return False
    return True


def planned_path(
    obj: SourceObject, f: PlainFile | None, fail: Callable[[SourceObject, str, str], None]
) -> IntervalPath | None:
    """The interval proflake.sources.plain planned for ``obj``, checked as a path's would be."""
    if f is None:
        return None
    if not is_utf8(obj.uri):
        fail(obj, "layout", f"{obj.uri}: its path is not UTF-8, which the store's string columns require; rename it")
        return None
    try:
        return plain_interval(
            obj.parts[:-1], f.profiler, f.node_id, f.mode, f.step, f.start_time_us, f.end_time_us, obj.parts[-1], f.task_format,
        )
    except LayoutError as e:
        fail(obj, e.kind, f"{obj.uri}: {e}")
        return None
