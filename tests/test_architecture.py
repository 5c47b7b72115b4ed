"""The package's shape, checked: arrows point down, no import cycles, modules small, `import proflake` cheap.

The layers, highest first (a module may import only from its own layer's package or lower ones):
LAYERS below. Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted.
Run alone: ``bin/test tests/test_architecture.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "etl" / "proflake"

# Highest first. A name is a subpackage or a top-level module of proflake; names on one line share a layer
# and must not import each other (they are independent).
LAYERS: list[tuple[str, ...]] = [
    ("cli",),
    ("spark",),
    ("capture",),
    ("smdebug",),
    ("render",),
    ("query",),
    ("operations",),
    ("bi",),
    ("ingestion",),
    ("workers",),
    ("store",),
    ("sources", "readers", "layout"),
    ("docs",),
    ("views",),
    ("sql", "schema", "modes", "times", "numbers"),
    ("errors", "resources", "_lazy"),
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The proflake modules ``module`` imports at run time (function-level imports included)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("proflake"))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                if base.startswith("proflake"):
                    for alias in child.names:
                        candidate = f"{base}.{alias.name}"
                        found.add(candidate if candidate in known else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: {i for i in _imports(m, p, known) if i != m} for m, p in modules.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_has_a_layer():
    unplaced = sorted({_layer(m) for m in _modules()} - set(RANK) - {None})
    assert not unplaced, f"add these to LAYERS in tests/test_architecture.py: {unplaced}"


def test_arrows_point_down():
    upward = []
    for module, imports in _graph().items():
        own = _layer(module)
        if own is None:  # proflake/__init__.py: lazy exports only
            continue
        for target in imports:
            theirs = _layer(target)
            if theirs is None or theirs == own:
                continue
            if RANK[theirs] <= RANK[own]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that point up or sideways:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            strongconnect(v)
    assert not cycles, f"import cycles: {cycles}"


def test_modules_stay_small():
    big = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            big[rel] = lines
    assert not big, f"modules over {MAX_LINES} lines (split them): {big}"


def test_import_proflake_is_cheap_and_the_library_never_imports_the_cli():
    code = (
        "import sys, proflake; "
        "heavy = sorted(m for m in ('duckdb', 'pyarrow', 'deltalake', 'boto3', 'pandas', 'click') if m in sys.modules); "
        "print(','.join(heavy)); "
        "from proflake import Profiles, ingest; "
        "print(','.join(sorted(m for m in sys.modules if m.startswith('proflake.cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["", ""], out


def test_no_etl_module_is_installed(tmp_path):
    # From another folder: in the checkout, etl/ would import as a namespace package.
    result = subprocess.run([sys.executable, "-c", "import etl"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0 and "No module named 'etl'" in result.stderr


def test_tests_import_helpers_from_tests_helpers_not_conftest():
    tests = Path(__file__).resolve().parent
    offenders = [
        p.name
        for p in tests.glob("test_*.py")
        if any(line.startswith(("from conftest import", "import conftest")) for line in p.read_text().splitlines())
    ]
    assert not offenders, (
        f"{offenders} import from conftest: import helpers from tests/helpers/ instead "
        "(from helpers.profiles import JobBuilder, LEGACY, ...; from helpers import s3server)"
    )
