"""The CLI in the test's own process, through click's CliRunner, for tests where the process boundary is
not what is tested (exit codes, one-line errors and output are: they are the same in process).

A new ``python -m proflake.cli`` costs ~0.5 s of CPU before it does anything (the interpreter, imports,
its parse workers); in process the imports are paid once per test run and the parse workers are kept.
Tests about signals, kills and a process's own output streams keep real processes.
"""

from __future__ import annotations

import os
import subprocess
import traceback
from collections.abc import Mapping, Sequence

from click.testing import CliRunner
from proflake.cli import cli


def run_cli(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``proflake ARGS`` with ``env`` as its whole environment (as subprocess.run's ``env``), answered as
    subprocess.run(..., capture_output=True, text=True) would: returncode, stdout, stderr. An exception
    that escaped the CLI is printed to stderr as the interpreter would print it."""
    overrides: dict[str, str | None] | None = None
    if env is not None:
        overrides = {name: None for name in os.environ if name not in env}
        overrides.update(env)
    result = CliRunner().invoke(cli, list(args), env=overrides, prog_name="proflake")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))  # type: ignore[misc]
    return subprocess.CompletedProcess(["proflake", *args], result.exit_code, result.stdout, stderr)
