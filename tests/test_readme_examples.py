"""Every example in README.md and docs/*.md runs, and prints what the page shows.

The convention (docs/cli.md, "Examples in the docs"): a fenced block whose info string is ``console``
is an example (except in the sections of ELSEWHERE, which other tests run). Its lines starting with
``$ proflake`` are commands (continued on the next lines after a backslash or an open quote); the lines after a command, up to the
next command, are what it prints on stdout. In an expected line, ``...`` matches any text and a run of
spaces matches any run of spaces; a line that is only ``...`` matches any number of lines. stderr is
not compared. Commands run in order, in one working folder per page, as on a terminal 100 characters
wide (``NO_COLOR``), where ``./bin/demo`` has run (``./proflake-store`` holds the demo's job,
``proflake-sample-job``) and ``tests/data/`` is the repository's. In README.md the ``python`` blocks run
too, each as a script in that folder. Other fenced blocks (``sh``, ``sql``, ...) are not run here; in
README.md each such block says why in a line that holds "not run", and no example is an indented block.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from proflake.cli import cli, common

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
WIDTH = 100


# Sections whose console blocks another test runs, on its own store: heading -> that test.
ELSEWHERE = {"## Five worked queries": "tests/test_catalog.py (the worked queries' hand-named job)"}


def examples(page: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, command, expected stdout lines) of every example on ``page``, in order. A command
    continues on the next lines while it ends with a backslash or has an unclosed quote."""
    found: list[tuple[int, str, list[str]]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    inside = skipped = continuing = False
    for number, line in enumerate(lines, 1):
        if line.startswith("#"):
            skipped = line.strip() in ELSEWHERE
        if not inside:
            inside = line.strip() == "```console" and not skipped
            continue
        if line.strip().startswith("```"):
            inside = False
        elif continuing:
            found[-1] = (found[-1][0], found[-1][1].removesuffix("\\") + "\n" + line, [])
            continuing = _unfinished(found[-1][1])
        elif line.startswith("$ "):
            found.append((number, line[2:], []))
            continuing = _unfinished(line[2:])
        elif found:
            found[-1][2].append(line)
    return found


def fenced_blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line number of the opening fence, info string, text) of every fenced block on ``page``."""
    blocks: list[tuple[int, str, str]] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            if opened is None:
                opened, body = (number, line[3:].strip()), []
            else:
                blocks.append((*opened, "\n".join(body)))
                opened = None
        elif opened is not None:
            body.append(line)
    return blocks


def _unfinished(command: str) -> bool:
    if command.endswith("\\"):
        return True
    try:
        shlex.split(command)
    except ValueError:
        return True
    return False


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` fits ``expected``, with ``...`` lines and in-line ``...`` as wildcards."""
    patterns = [
        None if line.strip() == "..." else re.compile(
            r"\s+".join(".*".join(re.escape(part) for part in word.split("...")) for word in line.split()) + r"\Z"
        )
        for line in expected
    ]

    def fit(p: int, a: int) -> bool:
        if p == len(patterns):
            return a == len(actual)
        if patterns[p] is None:
            return any(fit(p + 1, b) for b in range(a, len(actual) + 1))
        return a < len(actual) and patterns[p].match(actual[a].strip()) is not None and fit(p + 1, a + 1)

    return fit(0, 0)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder like a fresh clone's root after ./bin/demo: tests/data, the demo's job and store."""
    folder = tmp_path_factory.mktemp("examples")
    (folder / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(cli, ["demo"], env={"PROFLAKE_STORE": ""})
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.stderr
    return folder


def test_the_docs_have_examples():
    assert sum(len(examples(page)) for page in PAGES) >= 5


def test_the_matcher_is_strict_where_it_must_be():
    assert matches(["a  ...  c", "..."], ["a   b c", "x", "y"])
    assert not matches(["a b"], ["a b", "extra"])
    assert not matches(["1.04 s"], ["1.05 s"])


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p)], ids=lambda p: p.name)
def test_every_example_prints_what_the_page_shows(page, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(common, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("PROFLAKE_STORE", raising=False)
    for number, command, expected in examples(page):
        argv = shlex.split(command)
        assert argv[0] == "proflake", f"{page.name}:{number}: examples run proflake commands only"
        result = CliRunner().invoke(cli, argv[1:])
        assert result.exit_code == 0, f"{page.name}:{number}: {command}\n{result.stderr}"
        actual = result.stdout.rstrip("\n").splitlines() if result.stdout.strip() else []
        while expected and not expected[-1].strip():
            expected = expected[:-1]
        assert matches(expected, actual), (
            f"{page.name}:{number}: {command}\n--- the page shows:\n" + "\n".join(expected)
            + "\n--- it prints:\n" + "\n".join(actual)
        )


def test_every_readme_block_runs_or_says_why_not():
    """README.md's examples are console blocks (run above) and python blocks (run below); any other
    fenced block says in a "not run" line why the tests cannot run it, and none is an indented block."""
    for number, info, text in fenced_blocks(README):
        if info not in ("console", "python"):
            assert "not run" in text, f"README.md:{number}: a {info or 'plain'} block that does not say why it is not run"
    lines = README.read_text(encoding="utf-8").splitlines()
    inside = False
    for number, (before, line) in enumerate(zip([""] + lines, lines), 1):
        inside = inside != line.startswith("```")
        assert inside or not (line.startswith("    ") and not before.strip()), (
            f"README.md:{number}: an indented code block; fence it as console (run) or say why it is not run"
        )


def test_the_readme_python_examples_run(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("PROFLAKE_STORE", raising=False)
    blocks = [(number, text) for number, info, text in fenced_blocks(README) if info == "python"]
    assert len(blocks) >= 2
    for number, text in blocks:
        exec(compile(text, f"README.md:{number}", "exec"), {"__name__": "__readme__"})
