"""``proflake`` processes forked from one interpreter that has imported proflake, for the kill sweeps.

A kill sweep runs the ingest once per commit point and kills it there. A new interpreter per run
(``python -m proflake.cli``) costs ~0.5 s of CPU in start-up and imports before the run does anything,
and the sweeps run dozens. Here one interpreter per test module (the zygote) imports proflake, the CLI,
DuckDB, pyarrow and deltalake, and forks a child per run: the child is a real process that runs the real
CLI, SIGKILLs itself at its crash point (``PROFLAKE_KILL_AFTER_COMMITS``) or is killed by the test, and
its parse workers are real processes too. What is not the same as a new interpreter: the imports are
done before the fork (nothing has run: no store opened, no thread pool started; deltalake's runtime
starts in the child). Every sweep forks its runs from here; what a new interpreter adds (start-up,
imports, the CLI's entry point) is covered by tests that start ``python -m proflake.cli`` and stop it
at a commit point: tests/test_signals.py (SIGTERM and SIGHUP after commits 1, 5 and 2) and
tests/test_batches.py::test_fact_files_of_a_killed_run_stay_out_of_the_tables (SIGKILL after commit 2).

A sweep whose subject is the committing process passes ``INLINE`` (``--executor inline``): its child
parses on its own threads (etl/proflake/workers/inline.py) instead of starting a parse worker process
(~0.3 s of CPU each run, and one left running without its parent after each kill). A sweep that kills at
random moments keeps real workers, which such a kill leaves behind.

``zygote.run(args, env=...)`` answers an object that behaves as the ``subprocess.Popen`` the tests
used: ``pid``, ``poll()``, ``wait()``, ``send_signal()``, ``communicate()`` (stderr as text) and
``returncode`` (negative: the signal that ended it). ``zygote.call("module:function", args)`` forks a
child that runs that function with those (string) arguments instead of the CLI (the data-safety
readers, helpers/safety_reader.py), exit status 0 when it returns, 1 when it raises.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = r"""
import importlib, json, os, sys
import duckdb, pyarrow, pyarrow.parquet, deltalake
import proflake.cli, proflake.operations, proflake.ingestion.batch, proflake.workers.pool

def child(request):
    devnull = os.open(os.devnull, os.O_RDWR)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(err, 2)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    target = request.get("call")
    sys.argv = [target or "proflake", *request["args"]]
    code = 0
    try:
        if target:
            module, _, name = target.partition(":")
            getattr(importlib.import_module(module), name)(*request["args"])
        else:
            proflake.cli.cli.main(args=request["args"], prog_name="proflake")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    import atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

def status(raw):
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)

channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
for line in channel_in:
    request = json.loads(line)
    if request["op"] == "run":
        pid = os.fork()
        if pid == 0:
            child(request)
        answer = {"pid": pid}
    else:
        done, raw = os.waitpid(request["pid"], 0 if request["op"] == "wait" else os.WNOHANG)
        answer = {"returncode": status(raw) if done else None}
    channel_out.write((json.dumps(answer) + "\n").encode())
    channel_out.flush()
"""


INLINE = ("--executor", "inline")  # ingest's parsing on the killed process's own threads


class ForkedProcess:
    """One forked ``proflake`` run, driven like a ``subprocess.Popen``."""

    def __init__(self, zygote: Zygote, pid: int, stderr: Path) -> None:
        self._zygote = zygote
        self.pid = pid
        self._stderr = stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote._ask({"op": "poll", "pid": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, once it has ended (``timeout``: give up after that many seconds, as Popen)."""
        if self.returncode is None:
            if timeout is not None:
                deadline = time.monotonic() + timeout
                while self.poll() is None:
                    if time.monotonic() > deadline:
                        raise subprocess.TimeoutExpired(f"proflake (pid {self.pid})", timeout)
                    time.sleep(0.01)  # polling a child's status, as Popen.wait(timeout) does
            else:
                self.returncode = self._zygote._ask({"op": "wait", "pid": self.pid})["returncode"]
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[None, str]:
        self.wait(timeout)
        return None, self._stderr.read_text(errors="replace")


class Zygote:
    """The interpreter the runs are forked from; ``close()`` (or ``with``) ends it."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._process = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env)
        self._scratch = Path(tempfile.mkdtemp(prefix="proflake-zygote-"))
        self._runs = 0

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, request: dict) -> dict:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the zygote ended (exit code {self._process.wait()})")
        return json.loads(line)

    def run(self, args: list[str], env: dict[str, str] | None = None) -> ForkedProcess:
        """``proflake ARGS`` in a forked child, with ``env`` added to this process's environment."""
        return self._fork(None, args, env)

    def call(self, target: str, args: list[str], env: dict[str, str] | None = None) -> ForkedProcess:
        """``module.function(*ARGS)`` (``target`` is ``"module:function"``, imported in the child from this
        process's ``sys.path``) in a forked child, with ``env`` added to this process's environment."""
        return self._fork(target, args, env)

    def _fork(self, target: str | None, args: list[str], env: dict[str, str] | None) -> ForkedProcess:
        self._runs += 1
        stderr = self._scratch / f"run-{self._runs}.stderr"
        answer = self._ask({"op": "run", "call": target, "args": [str(a) for a in args],
                            "env": {**os.environ, **(env or {})}, "cwd": os.getcwd(), "stderr": str(stderr)})
        return ForkedProcess(self, answer["pid"], stderr)

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)
        if self._process.stdout is not None:
            self._process.stdout.close()
        for path in self._scratch.iterdir():
            path.unlink()
        self._scratch.rmdir()
