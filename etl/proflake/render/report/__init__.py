"""The HTML report of a selection: one self-contained file (inline script, style and data; no network).

    >>> report = Profiles("./proflake-store").report()        # the whole job
    >>> report.write("report.html")
    >>> report                                                 # in a notebook: shown inline
    >>> Profiles("./proflake-store").diff("run-7", "run-8").report().write("diff.html")   # the diff page
    >>> Profiles("./proflake-store").trend(job_glob="nightly-*").report().write("trend.html")   # the trend page
"""

from proflake.render.report.diff import build_diff_report
from proflake.render.report.page import Report, build_report
from proflake.render.report.trend import build_trend_report

__all__ = ["Report", "build_diff_report", "build_report", "build_trend_report"]
