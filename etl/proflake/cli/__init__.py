"""The proflake command line: parse options, call one library function, print the result.

Results go to stdout, messages to stderr. Exit codes are ``proflake.errors.ExitCode``; every error a
user can cause is a ProflakeError and ends as one line on stderr. Each command family lives in its own
module, which registers its commands on the ``cli`` group when imported; ``COMMANDS`` says which module
that is, so a command imports only its own (``proflake jobs`` loads none of ingest's, sql's or diff's
modules: ~20 ms of its start-up).
"""

from __future__ import annotations

from proflake.cli.common import cli

# command -> the module of proflake.cli that defines it (tests/test_cli.py checks the map is complete)
COMMANDS = {
    "batches": "inspect", "catalog": "sql", "check": "check", "compact": "write", "demo": "demo", "diff": "diff",
    "errors": "inspect", "export": "export", "fetch": "fetch", "ingest": "write", "jobs": "inspect",
    "list": "inspect", "nodes": "inspect", "rebuild": "write", "report": "report", "sql": "sql", "trend": "trend",
}
cli.lazy_commands.update(COMMANDS)

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="proflake")
