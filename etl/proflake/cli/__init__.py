"""The proflake command line: parse options, call one library function, print the result.

Results go to stdout, messages to stderr. Exit codes are ``proflake.errors.ExitCode``; every error a
user can cause is a ProflakeError and ends as one line on stderr. Each command family lives in its own
module, registered on the ``cli`` group by importing it here.
"""

from __future__ import annotations

from proflake.cli import check, demo, diff, export, fetch, inspect, report, sql, write  # noqa: F401 - each module registers its commands
from proflake.cli.common import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="proflake")
