"""What runs in a template process (etl/proflake/workers/template.py): fork a parse worker per request.

The template imports this module and what a worker imports, nothing of the caller's side: a worker
forked from it holds only those modules (tests/test_workers.py checks that none of them reads the
process's settings, which a forked worker shares with its template).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
from typing import Any

MESSAGE_BYTES = 4096  # a request or an answer, pickled

# A worker, and a template, loads ``proflake`` as a bare package: the package's __init__ imports the
# query stack (DuckDB, deltalake, the API), which parsing never uses. And it hides pandas, which pyarrow
# imports on its first conversion of a Python list just to ask whether the list is a pandas object.
# Each saves ~40 MB per worker and a fraction of a second of its start. ``python -m
# proflake.workers.worker`` runs the same loop with the full package.
_HIDE_PANDAS = """
import sys
class NoPandas:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoPandas)
"""
WORKER_BOOT = _HIDE_PANDAS + "from proflake.workers.worker import worker_main\nworker_main(int(sys.argv[1]), sys.argv[2])\n"
TEMPLATE_BOOT = _HIDE_PANDAS + "from proflake.workers.template_process import serve\nserve(int(sys.argv[1]))\n"


def serve(control_fd: int) -> None:
    """The template's loop (in its own process): fork a worker per request until the caller goes."""
    from proflake.workers.worker import worker_main  # the imports every forked worker shares

    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle, and its workers'

    def reap(signum: int, frame: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            try:  # never blocks: a caller that stopped reading loses exit codes, not its template
                control.send(pickle.dumps(("exited", pid, os.waitstatus_to_exitcode(status))), socket.MSG_DONTWAIT)
            except OSError:
                pass

    signal.signal(signal.SIGCHLD, reap)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 2)
        except OSError:
            return
        if not message:
            return  # the caller closed its end
        number, memory_mb, spec, path = pickle.loads(message)
        pid = os.fork()
        if pid == 0:
            sys.path[:] = path  # the caller's, as a worker started now would get it (PYTHONPATH)
            _become_worker(control, fds, memory_mb, spec, worker_main)
        for fd in fds:
            os.close(fd)
        control.send(pickle.dumps(("forked", number, pid)))


def _become_worker(control: socket.socket, fds: list[int], memory_mb: int, spec: str, worker_main: Any) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a worker started on its own
        control.close()
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for fd in fds:
            os.close(fd)
        worker_main(memory_mb, spec)
        code = 0
    except BaseException:  # noqa: BLE001 - a worker's death is its exit code, as for one started alone
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)
