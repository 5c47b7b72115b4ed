"""A folder never stops the batch: a folder below the source that cannot be listed (a path over the
system's 4,096 bytes, permissions, EIO, a stale NFS handle) is quarantined as kind `listing` with the
system's reason, the rest of the source lands, the run exits 3, and once the folder can be listed its
files land and its entry is closed. Only the source root failing stops the run.

Real files on disk throughout. Tests run as root in CI, where mode 000 does not stop a listing, so a
permission or I/O error is injected into ``os.scandir`` for one folder of an in-process ingest; a path
too long to open fails for root too, and is tested through a real ``proflake ingest`` process."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.profiles import JobBuilder
from proflake import ingest
from proflake.errors import UnrecognisedFilesWarning
from proflake.store.store import Store
from test_batches import snapshot

GOOD = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"
NAME = "d" * 200  # one level of the deep chain; Linux names are at most 255 bytes, paths 4,095


def _interval(step: int) -> str:
    return GOOD.format(step=step, start=1000 + 1000 * step, end=1500 + 1000 * step)


def _source(src: Path) -> Path:
    """A job of two nodes; returns algo-2's node folder, the one made to fail."""
    job = JobBuilder(src / "job-1")
    for step in range(3):
        job.cprofile("algo-1", _interval(step))
    for step in range(2):
        job.cprofile("algo-2", _interval(step), "b")
    return job.stats_dir("cprofile", "algo-2", "x").parent


def _clean(src: Path, store: Path, without: Path | None = None) -> dict:
    """What a clean ingest of ``src`` gives (``without`` that folder: moved aside for it, then back)."""
    aside = store.with_name(store.name + "-aside")
    if without is not None:
        os.rename(without, aside)
    try:
        assert not ingest(str(src), str(store)).failed
    finally:
        if without is not None:
            os.rename(aside, without)
    return snapshot(str(store))


def _errors(store: Path, *extra: str) -> list[dict]:
    done = run_cli(["errors", "--store", str(store), "--format", "json", *extra])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _listing_rows(store: Path, *extra: str) -> list[dict]:
    return [e for e in _errors(store, *extra) if e["error_kind"] == "listing"]


def _fail_listing(monkeypatch: pytest.MonkeyPatch, folder: Path, error: OSError, when: str = "opening") -> None:
    """``os.scandir(folder)`` raises ``error`` when it is opened, or (``when="reading"``) after its first
    entry, as a read of the directory failing half-way; every other folder lists as usual."""
    real = os.scandir

    def scandir(path=".", *args, **kwargs):
        if isinstance(path, int) or os.fspath(path) != str(folder):  # (shutil.rmtree lists by descriptor)
            return real(path, *args, **kwargs)
        if when == "opening":
            raise error
        return _FailingHalfway(real(path, *args, **kwargs), error)

    monkeypatch.setattr(os, "scandir", scandir)


class _FailingHalfway:
    def __init__(self, it, error: OSError) -> None:
        self.it, self.error, self.given = it, error, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.it.close()

    def __iter__(self):
        return self

    def __next__(self):
        if self.given:
            raise self.error
        self.given += 1
        return next(self.it)


def _os_error(code: int, folder: Path) -> OSError:
    return OSError(code, os.strerror(code), str(folder))


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> dict:
    """A source read by every injected-fault test (never written), with the clean ingests to compare
    with: of its good files (algo-2 left out) and of all of them."""
    root = tmp_path_factory.mktemp("shared")
    node = _source(root / "src")
    return {
        "src": root / "src", "node": node,
        "good": _clean(root / "src", root / "good", without=node), "all": _clean(root / "src", root / "all"),
    }


@pytest.mark.parametrize("when", ["opening", "reading"])
@pytest.mark.parametrize("code", [errno.EIO, errno.ESTALE], ids=["EIO", "ESTALE"])
def test_an_io_error_or_stale_handle_on_one_folder_quarantines_it_and_the_rest_lands(tmp_path, monkeypatch, shared, code, when):
    src, node, store = shared["src"], shared["node"], tmp_path / "store"
    with monkeypatch.context() as patch:
        _fail_listing(patch, node, _os_error(code, node), when)
        report = ingest(str(src), str(store))
    assert [(f.uri, f.kind) for f in report.failed] == [(str(node), "listing")]
    assert report.partial
    assert snapshot(str(store)) == shared["good"]
    [row] = _listing_rows(store)
    reason = f"({os.strerror(code)}, {errno.errorcode[code]})"
    assert row["source_uri"] == str(node) and reason in row["message"] and row["closed_at"] is None
    assert row["message"].startswith(f"{node} cannot be listed")
    # The next night the folder lists: its files land, its entry is closed, the store is a clean one.
    again = ingest(str(src), str(store))
    assert not again.failed and again.new_intervals == 2
    assert snapshot(str(store)) == shared["all"]
    assert _listing_rows(store) == []
    [closed] = _listing_rows(store, "--all")
    assert closed["source_uri"] == str(node) and closed["closed_at"] is not None


def test_a_folder_of_mode_000_is_quarantined_exit_3_and_lands_once_readable(tmp_path, monkeypatch):
    src, store = tmp_path / "src", tmp_path / "store"
    node = _source(src)
    good = _clean(src, tmp_path / "good", without=node)
    node.chmod(0)
    try:
        with monkeypatch.context() as patch:
            try:
                os.listdir(node)  # root (as in CI) lists it anyway: the kernel's answer to others, injected
                _fail_listing(patch, node, _os_error(errno.EACCES, node))
            except PermissionError:
                pass
            done = run_cli(["ingest", str(src), "--store", str(store)])
    finally:
        node.chmod(0o755)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert f"failed: {node} cannot be listed (Permission denied, EACCES), so its files were skipped; check its permissions" in done.stderr
    assert snapshot(str(store)) == good
    assert [e["source_uri"] for e in _listing_rows(store)] == [str(node)]
    done = run_cli(["ingest", str(src), "--store", str(store)])
    assert done.returncode == 0, done.stderr
    assert snapshot(str(store)) == _clean(src, tmp_path / "all")
    assert _errors(store) == []


def _deep_chain(top: Path, levels: int) -> list[int]:
    """``top``/NAME/NAME/... ``levels`` deep, made with paths relative to each folder (a full path over
    4,096 bytes cannot be opened, but a folder can be made inside an open one); returns each folder's
    descriptor, ``top``'s first."""
    top.mkdir()
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    for _ in range(levels):
        os.mkdir(NAME, dir_fd=fds[-1])
        fds.append(os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
    return fds


def test_a_folder_path_over_4096_bytes_is_quarantined_and_lands_once_shortened(tmp_path):
    """A real ``proflake ingest`` process, a real ENAMETOOLONG: no injection, and root is refused too."""
    src, store = tmp_path / "src", tmp_path / "store"
    _source(src)
    good = _clean(src, tmp_path / "good")
    levels = (4200 - len(str(src / "deep"))) // (len(NAME) + 1) + 1
    # A job inside the chain, too deep to be listed: made at a short path, moved in by descriptor.
    JobBuilder(tmp_path / "job-deep").cprofile("algo-9", _interval(0), "c")
    fds = _deep_chain(src / "deep", levels)
    try:
        os.rename(tmp_path / "job-deep", "job-deep", dst_dir_fd=fds[-1])
        # The first folder of the chain whose path is 4,096 bytes or more: what the listing fails on.
        depth = next(n for n in range(levels + 1) if len(os.path.join(src, "deep", *[NAME] * n)) >= 4096)
        too_long = os.path.join(src, "deep", *[NAME] * depth)
        # Beside it, in the last folder that lists, a file whose own path is too long: its stat fails.
        long_file = os.path.join(os.path.dirname(too_long), "f" * (4096 - len(os.path.dirname(too_long))))
        os.close(os.open(os.path.basename(long_file), os.O_CREAT | os.O_WRONLY, dir_fd=fds[depth - 1]))
        done = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(src), "--store", str(store)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 3, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
        assert "cannot be listed (File name too long, ENAMETOOLONG), so its files were skipped" in done.stderr
        assert snapshot(str(store)) == good
        hint = "its path is longer than the system allows: move or rename it to shorten the path"
        assert sorted((row["source_uri"], row["message"]) for row in _listing_rows(store)) == [
            (too_long, f"{too_long} cannot be listed (File name too long, ENAMETOOLONG), so its files were skipped; {hint}"),
            (long_file, f"{long_file} cannot be listed (File name too long, ENAMETOOLONG), so it was skipped; {hint}"),
        ]
        # Fixed as the message says: every folder of the chain renamed to one letter.
        for parent in fds[:-1]:
            os.rename(NAME, "x", src_dir_fd=parent, dst_dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)
    with pytest.warns(UnrecognisedFilesWarning, match="fffff"):  # the long-named file, now listed: it fits no layout
        again = ingest(str(src), str(store))
    assert [f.uri for f in again.failed] == [] and again.new_intervals == 1
    rescued = os.path.join(src, "deep", *["x"] * levels, "job-deep")
    assert _errors(store) == []
    assert sorted((e["source_uri"], e["closed_at"] is not None) for e in _listing_rows(store, "--all")) == [
        (too_long, True), (long_file, True)]
    assert [uri for uri in _landed(store) if uri.startswith(rescued + "/")] == [
        os.path.join(rescued, "framework/pytorch/cprofile/algo-9", _interval(0), "python_stats")]
    shutil.rmtree(src / "deep")  # by descriptors: pytest's own clean-up need not meet the chain


def _landed(store: Path) -> list[str]:
    con = Store(str(store)).connect()
    try:
        return [row[0] for row in con.sql("SELECT source_uri FROM intervals ORDER BY 1").fetchall()]
    finally:
        con.close()


def test_files_quarantined_inside_an_unlisted_folder_stay_open_until_it_lists(tmp_path, monkeypatch):
    src, store = tmp_path / "src", tmp_path / "store"
    node = _source(src)
    bad = node / _interval(5) / "python_stats"
    bad.parent.mkdir()
    bad.write_bytes(b"not a marshal dump " * 10)
    assert [f.kind for f in ingest(str(src), str(store)).failed] == ["cprofile"]
    with monkeypatch.context() as patch:
        _fail_listing(patch, node, _os_error(errno.EIO, node))
        assert [f.kind for f in ingest(str(src), str(store)).failed] == ["listing"]
    # Not looked for, so not taken for gone: the bad file's entry is still open, beside the folder's.
    assert sorted((e["source_uri"], e["error_kind"]) for e in _errors(store)) == [(str(node), "listing"), (str(bad), "cprofile")]
    assert [f.kind for f in ingest(str(src), str(store)).failed] == ["cprofile"]
    [entry] = _errors(store)
    assert entry["source_uri"] == str(bad) and entry["attempts"] == 2


def test_a_full_refresh_that_cannot_list_a_folder_changes_nothing(tmp_path, monkeypatch, shared):
    """A full refresh drops what it did not list again: with a folder it could not list it would drop
    that folder's intervals, so it stops, in one sentence, before it changes anything."""
    store = tmp_path / "store"
    assert not ingest(str(shared["src"]), str(store)).failed
    with monkeypatch.context() as patch:
        _fail_listing(patch, shared["node"], _os_error(errno.ESTALE, shared["node"]))
        done = run_cli(["ingest", str(shared["src"]), "--store", str(store), "--full-refresh"])
    assert done.returncode == 1
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert "a full refresh would drop what was ingested from it, so it changed nothing" in done.stderr
    assert snapshot(str(store)) == shared["all"]


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO])
def test_the_source_root_that_cannot_be_listed_stops_the_run_in_one_sentence(tmp_path, monkeypatch, shared, code):
    with monkeypatch.context() as patch:
        _fail_listing(patch, shared["src"], _os_error(code, shared["src"]))
        done = run_cli(["ingest", str(shared["src"]), "--store", str(tmp_path / "store")])
    assert done.returncode == 1
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert f"cannot list the source folder {str(shared['src'])!r} ({os.strerror(code)}, {errno.errorcode[code]})" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
