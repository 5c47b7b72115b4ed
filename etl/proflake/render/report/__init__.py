"""The HTML report of a selection: one self-contained file (inline script, style and data; no network).
Its pages draw what the query layer read (proflake.query.page_data); proflake.pages joins the two.

    >>> report = Profiles("./proflake-store").report()        # the whole job
    >>> report.write("report.html")
    >>> report                                                 # in a notebook: shown inline
    >>> Profiles("./proflake-store").diff("run-7", "run-8").report().write("diff.html")   # the diff page
    >>> Profiles("./proflake-store").trend(job_glob="nightly-*").report().write("trend.html")   # the trend page
"""

from proflake.render.report.page import Report

__all__ = ["Report"]
