"""Parse workers are forked from one template process per environment (etl/proflake/workers/template.py):
each worker is still its own process, crashing and being killed alone; a template that dies costs only
the saving; a fork of the caller never talks to the caller's template."""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading

import pytest
from proflake.workers import template
from proflake.workers.pool import ParsePool
from proflake.workers.protocol import Task


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rpartition(")")[2].split()[1])


def _run(payloads: list[bytes], workers: int = 2) -> tuple[dict, list]:
    with ParsePool(workers, memory_mb=512, timeout_s=20, parse="helpers.crashy:parse") as pool:
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", p) for i, p in enumerate(payloads)) for o in chunk.outcomes)
        return results, [w.process for w in pool._workers]


@pytest.fixture
def own_environment(monkeypatch):
    """A worker environment of this test's own (a setting pool._WORKER_SETTINGS counts), so no idle worker
    or template of another test is used, whose first worker was started alone already: the next start
    makes the template."""
    monkeypatch.setenv("LC_PROFLAKE_TEST_TEMPLATE", os.urandom(4).hex())
    from proflake.workers.pool import _environment

    template._STARTED_ALONE.add(_environment())
    return _environment()


def test_a_lone_first_worker_starts_as_its_own_interpreter_and_the_next_start_makes_the_template(monkeypatch):
    """A nightly batch of a few files starts one worker: a template would cost the same imports plus the
    fork's copy-on-write. Any later start in that environment (a retry, the next run's second worker)
    forks from a template."""
    monkeypatch.setenv("LC_PROFLAKE_TEST_TEMPLATE", os.urandom(4).hex())
    from proflake.workers.pool import _environment

    with ParsePool(1, memory_mb=512, timeout_s=20, parse="helpers.crashy:parse") as pool:
        pool.start()
        first = pool._workers[0].process
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", p) for i, p in enumerate([b"ok", b"segfault", b"ok-2"])) for o in chunk.outcomes)
        retry = pool._workers[0].process
    assert results[1].kind == "crash" and results[0]["profiler"] == results[2]["profiler"] == "cprofile"
    assert not isinstance(first, template.ForkedProcess) and first.returncode == -signal.SIGSEGV
    assert isinstance(retry, template.ForkedProcess) and _environment() in template._TEMPLATES


pytestmark = pytest.mark.skipif(not template.AVAILABLE or not os.path.isdir("/proc"), reason="fork, SCM_RIGHTS and /proc")


def test_the_workers_of_one_environment_are_forked_from_one_template(own_environment):
    results, processes = _run([b"ok-%d" % i for i in range(40)])
    assert sorted(results) == list(range(40)) and all(r["profiler"] == "cprofile" for r in results.values())
    forked = template._TEMPLATES[own_environment]
    assert len(processes) == 2 and all(isinstance(p, template.ForkedProcess) for p in processes)
    assert {_parent_of(p.pid) for p in processes} == {forked.process.pid}
    assert len({p.pid for p in processes}) == 2  # two processes, not one


def test_a_worker_forked_from_the_template_crashes_alone_and_its_signal_is_reported(own_environment):
    results, _ = _run([b"ok", b"segfault", b"ok-2", b"exit", b"ok-3"], workers=1)
    assert results[1].kind == "crash" and "signal 11" in results[1].message
    assert results[3].kind == "crash" and "exit code 3" in results[3].message
    assert all(results[i]["profiler"] == "cprofile" for i in (0, 2, 4))
    assert template._TEMPLATES[own_environment].process.poll() is None  # a worker's death is not the template's


def test_a_dead_template_costs_only_the_saving(own_environment):
    _run([b"ok"], workers=1)
    forked = template._TEMPLATES[own_environment]
    forked.process.kill()
    forked.process.wait()
    # Its idle worker lives on (its pipes are the pool's); a new worker needs a new template.
    results, processes = _run([b"ok-%d" % i for i in range(6)], workers=2)
    assert sorted(results) == list(range(6)) and all(r["profiler"] == "cprofile" for r in results.values())
    assert template._TEMPLATES[own_environment] is not forked and template._TEMPLATES[own_environment].alive


def test_a_template_dead_before_it_forks_is_replaced_by_a_worker_started_alone(own_environment, monkeypatch):
    """A request the template never answers (it died doing its imports): the pool starts that worker
    as its own interpreter instead of failing the run."""
    real = template.Template.__init__

    def broken(self, command, env):
        real(self, [command[0], "-c", "import os; os._exit(7)", "--"], env)  # a template that dies at once

    monkeypatch.setattr(template.Template, "__init__", broken)
    results, processes = _run([b"ok-%d" % i for i in range(4)], workers=1)
    assert sorted(results) == list(range(4)) and all(r["profiler"] == "cprofile" for r in results.values())
    assert processes and all(not isinstance(p, template.ForkedProcess) for p in processes)


def test_killing_a_worker_of_a_stuck_template_gives_the_template_up(own_environment, monkeypatch):
    """A template stuck in its imports never answers. Killing a worker asked of it (the pool does when a
    worker is not ready within 120 s) must not wait for that worker's pid forever: the template is given
    up, and the worker reads as never started."""
    real = template.Template.__init__

    def stuck(self, command, env):
        real(self, [command[0], "-c", "import signal; signal.pause()", "--"], env)  # never reads a request

    monkeypatch.setattr(template.Template, "__init__", stuck)
    monkeypatch.setattr(template, "ANSWER_WAIT_S", 0.5)
    process, tasks, results = template.start_worker(512, "helpers.crashy:parse", own_environment, together=2)
    given_up = template._TEMPLATES.pop(own_environment)
    try:
        killer = threading.Thread(target=process.kill, daemon=True)
        killer.start()
        killer.join(30)
        assert not killer.is_alive(), "kill() still waits for a pid the stuck template will never say"
        assert not given_up.alive and process.poll() == -signal.SIGKILL
    finally:
        tasks.close()
        results.close()
        given_up.process.kill()
        given_up.process.wait()


def test_a_fork_of_the_caller_starts_its_own_template_and_never_uses_the_caller_s_workers(own_environment):
    """A fork of the caller (a multiprocessing child, a test's forked run) inherits the caller's idle
    workers and template; it must use neither: their pipes and socket are one conversation each."""
    _run([b"ok"], workers=1)
    ours = template._TEMPLATES[own_environment]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        code = 1
        try:
            os.close(read)
            theirs = template._TEMPLATES.get(own_environment)
            results, processes = _run([b"ok-%d" % i for i in range(4)], workers=2)
            fine = sorted(results) == list(range(4)) and theirs is None
            mine = template._TEMPLATES[own_environment].process.pid
            os.write(write, f"{int(fine)} {mine} {_parent_of(processes[0].pid)}".encode())
            template.stop_templates()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        fine, theirs, parent = f.read().split()
    assert os.waitpid(child, 0)[1] == 0
    assert fine == "1" and int(theirs) != ours.process.pid and int(parent) == int(theirs)
    # The caller's template still serves the caller.
    results, _ = _run([b"ok-%d" % i for i in range(3)], workers=1)
    assert sorted(results) == list(range(3)) and ours.alive and ours.process.poll() is None


def test_stopping_the_templates_ends_their_processes(own_environment):
    _run([b"ok"], workers=1)
    forked = template._TEMPLATES[own_environment]
    forked.stop()
    assert forked.process.returncode is not None and not forked.alive
    assert forked.process.returncode != -signal.SIGKILL  # it ended when the caller closed its end
    del template._TEMPLATES[own_environment]


def test_a_signal_landing_as_a_worker_is_asked_for_shifts_no_answer_and_leaves_no_worker(own_environment, monkeypatch):
    """Ctrl-C or SIGTERM raise in the main thread (cli/signals.py), anywhere: one landing right after a
    request went to the template must not hand the next worker another's pid (the answers are numbered),
    and the worker forked for it exits (its pipes are closed)."""
    _run([b"ok-%d" % i for i in range(4)], workers=2)
    forked = template._TEMPLATES[own_environment]
    real = template.socket.send_fds

    def interrupted(*args, **kwargs):
        real(*args, **kwargs)
        monkeypatch.setattr(template.socket, "send_fds", real)
        raise KeyboardInterrupt  # what a signal handler raises, just after the request went out

    monkeypatch.setattr(template.socket, "send_fds", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run([b"ok-%d" % i for i in range(4)], workers=3)  # a third worker: a new request to the template
    with ParsePool(3, memory_mb=512, timeout_s=20, parse="helpers.crashy:parse") as pool:
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", b"ok-%d" % i) for i in range(9)) for o in chunk.outcomes)
        processes = [w.process for w in pool._workers]
        parents = {p.pid: _parent_of(p.pid) for p in processes}  # while all three live
    assert sorted(results) == list(range(9)) and all(r["profiler"] == "cprofile" for r in results.values())
    assert len(processes) == 3 and all(isinstance(p, template.ForkedProcess) for p in processes)
    assert set(parents.values()) == {forked.process.pid} and len(parents) == 3  # each its own pid
    # The worker forked for the interrupted request exits (nobody holds its pipes): only the pool's kept
    # workers stay the template's children. A pidfd waits for a process that is not our child.
    for pid in _children(forked.process.pid) - set(parents):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # gone already
        try:
            assert select.select([fd], [], [], 30)[0], f"the worker {pid} of the interrupted request still runs"
        finally:
            os.close(fd)
    assert _children(forked.process.pid) <= set(parents)


def _children(parent: int) -> set[int]:
    """The live (not zombie) children of ``parent``."""
    return {int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _alive_child(int(pid), parent)}


def _alive_child(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return False
    return int(fields[1]) == parent and fields[0] != "Z"


class _InterruptedSocket:
    """A template's socket on which a signal's exception (Ctrl-C; SIGTERM's Terminated, cli/signals.py)
    lands just after the first read that returns a "forked" answer ("read"), or just before the read that
    follows it ("noted")."""

    def __init__(self, real, when: str) -> None:
        self.real, self.when, self.answered = real, when, False

    def recv(self, *args):
        if self.answered and self.when == "noted":
            self.when = ""
            raise KeyboardInterrupt
        message = self.real.recv(*args)
        if message and pickle.loads(message)[0] == "forked" and not self.answered:
            self.answered = True
            if self.when == "read":
                raise KeyboardInterrupt
        return message

    def __getattr__(self, name: str):
        return getattr(self.real, name)


@pytest.mark.parametrize("when", ["read", "noted"])
def test_a_signal_landing_as_an_answer_is_read_loses_no_pid(own_environment, when):
    """A signal's exception raised just after the caller read the template's answer, before noting it,
    must not lose it: the worker would have no pid, and killing it (the pool's clean-up after that very
    signal) would wait for the answer forever, a hang at exit. An answer read again after it was noted
    changes nothing (the worker is not killed, its pid is the same)."""
    _run([b"ok"], workers=1)
    forked = template._TEMPLATES[own_environment]
    real = forked.control
    process, tasks, results = template.start_worker(512, "helpers.crashy:parse", own_environment, together=2)
    forked.control = _InterruptedSocket(real, when)
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in range(30):  # the template answers once it has forked the worker
                forked.drain(1.0)
    finally:
        forked.control = real
    if process.known_pid is None:
        forked.drain(5.0)  # the answer is still there to be read: at once
    assert process.known_pid is not None and _parent_of(process.pid) == forked.process.pid
    assert process.poll() is None  # not killed by an answer read twice
    tasks.close()
    results.close()
    assert process.wait(timeout=30) >= 0  # it ends by itself once its pipes close, and its template says so
