"""The HTML report of a selection: one self-contained file (inline script, style and data; no network).

    >>> report = Profiles("./proflake-store").report()        # the whole job
    >>> report.write("report.html")
    >>> report                                                 # in a notebook: shown inline
"""

from proflake.render.report.page import Report, build_report

__all__ = ["Report", "build_report"]
