"""Assemble the report page: the template, its style and script (static/), and the data as JSON."""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from proflake.errors import ProflakeError


@cache
def _static(name: str) -> str:
    # (one part per joinpath: Traversable.joinpath takes one before Python 3.11)
    return files("proflake.render.report").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON that cannot end its <script> element early: every '<' is written as \\u003c."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _script(page: str) -> str:
    """The page's script: the shared helpers and flame graph, then the page's own sections, in one function."""
    parts = [_static("common.js"), _static("flame.js"), _static(f"{page}.js")]
    return '(function () {\n  "use strict";\n' + "".join(parts) + "})();\n"


def render_html(data: dict[str, Any], page: str = "report") -> str:
    """``page`` (report, diff or trend): static/<page>.html with the shared style, the script and ``data``."""
    html_text = _static(f"{page}.html")
    # Replace the data last: it is the only part that comes from profiles.
    for marker, text in (("/*CSS*/", _static("report.css")), ("/*JS*/", _script(page)), ("/*DATA*/", _json_for_script(data))):
        before, found, after = html_text.partition(marker)
        if not found:
            raise AssertionError(f"{page}.html lacks {marker}")
        html_text = before + text + after
    return html_text


class Report:
    """An HTML page: ``html`` is the whole page, ``data`` what it shows; ``write`` saves it. ``page`` is
    report (a selection's report), diff (a DiffResult's page) or trend (a TrendResult's page)."""

    def __init__(self, data: dict[str, Any], page: str = "report") -> None:
        self.data = data
        self.page = page
        self.html = render_html(data, page)

    def write(self, path: str | Path) -> Path:
        target = Path(path)
        try:
            target.write_text(self.html, encoding="utf-8")
        except OSError as e:
            raise ProflakeError(f"cannot write the report to {str(target)!r}: {e.strerror}") from e
        return target

    def _repr_html_(self) -> str:
        # An iframe keeps the page's script and style apart from the notebook's.
        return f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width:100%;height:720px;border:1px solid #ddd"></iframe>'

    def __repr__(self) -> str:
        if self.page == "trend":
            return f"<proflake Report: trend, {len(self.data['jobs'])} jobs, {len(self.data['changes'])} changes, {len(self.html):,} bytes>"
        if self.page == "diff":
            return f"<proflake Report: diff, {len(self.data['diff']['functions'])} functions, {len(self.html):,} bytes>"
        return f"<proflake Report: {self.data['meta']['method']}, {self.data['overview']['intervals']} intervals, {len(self.html):,} bytes>"

