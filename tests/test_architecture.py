"""The package's shape, checked: arrows point down, no import cycles, modules small, `import proflake` cheap,
and the render layer draws plain data: it runs no SQL.

The layers, highest first (a module may import only from its own layer's package or lower ones):
LAYERS below. The package's own ``__init__`` is the top layer, its lazy exports counted as imports.
Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted. One upward arrow is
allowed, and only inside a function: the results' ``report()`` methods (query) call ``proflake.pages``,
which joins the query layer (what a page shows, read from the store) and the render layer (drawing it).
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
    ("proflake",),  # the package's __init__: lazy exports of every layer
    ("cli",),
    ("spark",),
    ("capture",),
    ("smdebug",),
    ("pages",),
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
    ("sql", "schema", "modes", "times", "numbers", "formats"),
    ("errors", "resources", "_lazy", "arrowfn"),
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
MAX_LINES = 400
# The one upward arrow (module -> module), each a late import inside a method: the results' report() methods.
UPWARD_IN_FUNCTIONS = {
    ("proflake.query.result", "proflake.pages"),
    ("proflake.query.diff", "proflake.pages"),
    ("proflake.query.trend", "proflake.pages"),
}
# What the render layer must not import, even inside a function: it draws what the query layer read.
RENDER_NEVER_IMPORTS = ("duckdb", "proflake.sql", "proflake.query.engine", "proflake.query.profiles",
                        "proflake.query.page_data", "proflake.query.bounded", "proflake.query.readonly", "proflake.pages")


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


def _imports(module: str, path: Path, known: set[str], *, module_level: bool = False, every: bool = False) -> set[str]:
    """The proflake modules ``module`` imports at run time: function-level imports included unless
    ``module_level``; an ``__init__``'s lazy exports (a dict of name -> "proflake.x" module) included;
    with ``every``, third-party modules too (their top-level name)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if every or a.name.startswith("proflake"))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                if base.startswith("proflake"):
                    for alias in child.names:
                        candidate = f"{base}.{alias.name}"
                        found.add(candidate if candidate in known else base)
                elif every:
                    found.add(base)
            elif path.name == "__init__.py" and isinstance(child, ast.Dict):
                found.update(
                    v.value for v in child.values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value in known
                )
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: {i for i in _imports(m, p, known) if i != m} for m, p in modules.items()}


def _layer(module: str) -> str:
    """The layer of a module: its subpackage or top-level module, or "proflake" for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_module_has_a_layer():
    unplaced = sorted({_layer(m) for m in _modules()} - set(RANK))
    assert not unplaced, f"add these to LAYERS in tests/test_architecture.py: {unplaced}"


def test_arrows_point_down():
    upward = []
    for module, imports in _graph().items():
        own = _layer(module)
        for target in imports:
            theirs = _layer(target)
            if theirs == own or (module, target) in UPWARD_IN_FUNCTIONS:
                continue
            if RANK[theirs] <= RANK[own]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that point up or sideways:\n" + "\n".join(sorted(upward))


def test_the_one_upward_arrow_is_a_late_import_and_is_used():
    modules = _modules()
    known = set(modules)
    graph = _graph()
    for module, target in sorted(UPWARD_IN_FUNCTIONS):
        assert target in graph[module], f"{module} no longer imports {target}: drop it from UPWARD_IN_FUNCTIONS"
        assert target not in _imports(module, modules[module], known, module_level=True), (
            f"{module} imports {target} at module level: only a late import inside the method is allowed"
        )


def test_the_package_init_is_covered_and_nothing_imports_it():
    graph = _graph()
    assert "proflake.pages" in graph["proflake"] and "proflake.query.profiles" in graph["proflake"], graph["proflake"]
    importers = sorted(m for m, imports in graph.items() if "proflake" in imports)
    assert not importers, f"import from the defining module, not the package's lazy exports: {importers}"


def test_query_and_render_do_not_import_each_other_in_a_circle():
    """The query layer never imports the render layer (not even in a function); the render layer imports
    no SQL, DuckDB or engine, and nothing that reads the store (query/page_data does, for it)."""
    modules = _modules()
    known = set(modules)
    query_to_render = sorted(
        f"{m} -> {t}" for m, imports in _graph().items() if _layer(m) == "query" for t in imports if _layer(t) == "render"
    )
    assert not query_to_render, query_to_render
    render_reaches = sorted(
        f"{m} -> {t}"
        for m, p in modules.items()
        if _layer(m) == "render"
        for t in _imports(m, p, known, every=True)
        if t.split(".")[0] == "duckdb" or t in RENDER_NEVER_IMPORTS
    )
    assert not render_reaches, "the render layer draws plain data; it reads nothing itself:\n" + "\n".join(render_reaches)


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

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in graph:
            if v not in index:
                strongconnect(v)
    finally:
        # Put back: tests of deep documents (tests/test_plain_files.py) rely on the default limit, and
        # pytest-xdist may run them after this one in the same process.
        sys.setrecursionlimit(limit)
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
