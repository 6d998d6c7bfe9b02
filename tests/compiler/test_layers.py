"""The package's shape, from its imports (every import, function-level ones included): no import
cycles, each layer importing only the layers below it (docs/architecture.md), and pyspark only in
the runtime, the bench and control. No Spark needed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parent.parent.parent / "streamfold"

# Which top-level parts of the package each part may import (besides itself and errors.py).
ALLOWED = {
    "settings": set(),  # the registry of settings: read by every layer that runs something
    "ir": set(),
    "sql": {"ir"},
    "passes": {"ir"},
    "plan": {"ir", "sql", "passes"},
    "runtime": {"ir", "sql", "passes", "plan", "settings", "connectors"},
    # sources and sinks behind one interface each (connectors/__init__.py); the runtime opens them
    "connectors": set(),
    # A running query's controller: it steers the runtime through runtime/hooks.py and compiles
    # a reconfiguration's query; the runtime never imports it.
    "control": {"ir", "sql", "plan", "runtime", "settings"},
    "verify": {"sql"},
    "linalg": {"runtime"},
    "bench": {"ir", "sql", "passes", "plan", "runtime", "verify", "control", "linalg", "settings"},
    "demo": {"bench", "runtime", "verify"},
    "studio": {"__init__", "ir", "runtime", "control", "connectors"},
    "cli": {"plan", "sql", "runtime", "bench", "demo", "studio", "control", "linalg", "settings"},
    "__init__": {"ir", "plan", "sql", "runtime", "control", "settings"},
    "__main__": {"cli"},
}
# control drives a running query's Spark session (cancels its jobs, evaluates breakpoints, runs
# inspections); linalg has a Spark back-end
SPARK_PARTS = {"connectors", "runtime", "bench", "control", "linalg"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_each_layer_imports_only_the_layers_below_it() -> None:
    modules = _modules()
    wrong = []
    for m, p in modules.items():
        part = _part(m)
        if part not in ALLOWED:
            continue
        for n in _imports(m, p, modules):
            other = _part(n)
            if other not in (part, "errors", "__init__") and other not in ALLOWED[part]:
                wrong.append(f"{m} imports {n}")
    assert not wrong, wrong


def test_only_the_runtime_the_bench_and_control_import_pyspark() -> None:
    modules = _modules()
    for m, p in modules.items():
        text = p.read_text()
        if "import pyspark" in text or "from pyspark" in text:
            assert _part(m) in SPARK_PARTS, f"{m} imports pyspark"


# -- the runtime's inner layering (issue 53) ------------------------------------------------------
RUNTIME = "streamfold.runtime"
FEATURES = f"{RUNTIME}.features"
LOWERING = f"{RUNTIME}.lowering"
# The public facade (streamfold/__init__.py) is for users: the command line, the studio, the demo,
# the bench. The layers beneath it never import it.
FACADE_USERS = ("streamfold.cli", "streamfold.__main__", "streamfold.demo", "streamfold.studio", "streamfold.bench")
MAX_LINES = 700


def test_no_module_is_longer_than_700_lines() -> None:
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_feature_modules_never_import_the_engine_or_each_other() -> None:
    modules = _modules()
    wrong = []
    for m, p in modules.items():
        if not m.startswith(FEATURES + "."):
            continue
        for n in _imports(m, p, modules):
            if n == f"{RUNTIME}.engine" or (n.startswith(FEATURES + ".") and n != m):
                wrong.append(f"{m} imports {n}")
    assert not wrong, wrong


def test_the_lowering_package_imports_no_pyspark_and_nothing_of_the_runtime_but_itself() -> None:
    modules = _modules()
    for m, p in modules.items():
        if not (m == LOWERING or m.startswith(LOWERING + ".")):
            continue
        text = p.read_text()
        assert "import pyspark" not in text and "from pyspark" not in text, f"{m} imports pyspark"
        outside = {n for n in _imports(m, p, modules) if n.startswith(RUNTIME) and not n.startswith(LOWERING)}
        assert not outside, f"{m} imports {sorted(outside)}"


def test_only_the_facades_users_import_it() -> None:
    modules = _modules()
    wrong = [m for m, p in modules.items()
             if "streamfold" in _imports(m, p, modules) and not m.startswith(FACADE_USERS)]
    assert not wrong, f"these import streamfold's public facade (streamfold/__init__.py): {wrong}"


# A string that holds SQL: a statement or the clauses of one.
_SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\b(UNION ALL|GROUP BY|LEFT (SEMI|ANTI) JOIN|LATERAL VIEW|DISTRIBUTE BY|"
                  r"INSERT INTO|CREATE (TABLE|VIEW))\b")


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string literals of a module, f-strings as their text with ``{}`` for each value;
    docstrings left out (they may show a statement)."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inner.add(id(v))
                parts.append(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}")
            found.append((node.lineno, "".join(parts)))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                and id(node) not in inner):
            found.append((node.lineno, node.value))
    return found


def test_the_runtime_writes_sql_only_in_the_lowering_package() -> None:
    wrong = []
    for m, p in _modules().items():
        if not m.startswith(RUNTIME + ".") or m == LOWERING or m.startswith(LOWERING + "."):
            continue
        for line, text in _strings(ast.parse(p.read_text())):
            if _SQL.search(text):
                wrong.append(f"{p.relative_to(PACKAGE.parent)}:{line}: {text[:60]!r}")
    assert not wrong, "SQL written outside runtime/lowering/ (move it there, with a golden):\n" + "\n".join(wrong)
