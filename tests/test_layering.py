"""Layering rules, read from the import statements (ast) of every module of ours."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bridge", "guest_runtime", "service")
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

#: Each of these libraries may be imported by this one module of ours and no other.
SOLE_IMPORTER = {
    "quickjs": "guest_runtime/driver.py",
    "_quickjs": "guest_runtime/driver.py",
    "jsonschema": "service/tools/contracts.py",
    "referencing": "service/tools/contracts.py",
    "re2": "service/tools/patterns.py",
    "sqlite3": "service/stores/sqlite.py",
    "redis": "service/stores/redis_store.py",
    "mcp": "service/mcp/client.py",
    "prometheus_client": "service/metrics.py",
    "orjson": "bridge/jsoncodec.py",
}


def _modules() -> Iterator[Path]:
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Absolute top-level names a module imports (relative imports resolve to its own package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add(rel.parts[0])  # "from .x import" / "from .. import" stay inside the package
            elif node.module:
                names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module", "__import__",
        ) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value.split(".")[0])
    return names


IMPORTS = {str(p.relative_to(ROOT)): _imports(p) for p in _modules()}


def test_modules_were_found():
    """The scan sees the three packages (guards against a vacuous pass)."""
    for pkg in PACKAGES:
        assert any(m.startswith(pkg + "/") for m in IMPORTS), pkg
    assert "guest_runtime/driver.py" in IMPORTS


def test_bridge_imports_only_stdlib_orjson_and_itself():
    """bridge/ imports nothing but the standard library, orjson and bridge."""
    bad = {m: sorted(n for n in names if n not in STDLIB | {"orjson", "bridge"})
           for m, names in IMPORTS.items() if m.startswith("bridge/")}
    assert {m: n for m, n in bad.items() if n} == {}


def test_guest_runtime_never_imports_service():
    """guest_runtime/ does not import upward into service."""
    offenders = [m for m, names in IMPORTS.items() if m.startswith("guest_runtime/") and "service" in names]
    assert offenders == []


def test_lower_layers_never_import_upward():
    """bridge imports neither guest_runtime nor service."""
    offenders = [m for m, names in IMPORTS.items()
                 if m.startswith("bridge/") and names & {"guest_runtime", "service"}]
    assert offenders == []


@pytest.mark.parametrize("library", sorted(SOLE_IMPORTER))
def test_third_party_library_has_one_importer(library):
    """Each wrapped third-party library is imported only by its one translating module."""
    importers = sorted(m for m, names in IMPORTS.items() if library in names)
    assert set(importers) <= {SOLE_IMPORTER[library]}, importers


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in _modules()}


def _module_imports(name: str, path: Path) -> set[str]:
    """Our modules this one imports: top level, under TYPE_CHECKING or inside a function alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & MODULES.keys()
            found |= submodules
            if target in MODULES and len(submodules) < len(node.names):
                found.add(target)  # "from pkg import name": a name of pkg/__init__.py
    found.discard(name)
    return found


MODULE_GRAPH = {name: _module_imports(name, path) for name, path in MODULES.items()}


def _reaches(start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(MODULE_GRAPH[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(MODULE_GRAPH[name])
    return seen


def test_module_graph_sees_imports_of_every_kind():
    """The scan resolves relative, absolute and submodule imports (guards against a vacuous pass)."""
    assert "service.cells.dispatch" in MODULE_GRAPH["service.cells.cell"]  # from .dispatch import ...
    assert "service.errors" in MODULE_GRAPH["service.auth"]  # from service.errors import ...
    assert "bridge.jsoncodec" in MODULE_GRAPH["guest_runtime.worker"]  # from bridge import jsoncodec
    assert MODULE_GRAPH["service.cli"]


def test_no_import_circles():
    """No module imports another that imports it back, directly or through others."""
    circles = sorted(name for name in MODULE_GRAPH if name in _reaches(name))
    assert circles == []



MAX_MODULE_LINES = 450


def test_no_module_over_the_line_cap():
    """Every Python module of the three packages stays under the line cap (split by concern instead)."""
    long = {str(path.relative_to(ROOT)): n for path in _modules()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}
