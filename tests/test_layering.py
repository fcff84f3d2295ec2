"""Layering rules, read from the import statements (ast) of every module of ours."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bridge", "guest_runtime", "service")
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

#: Each of these libraries may be imported by this one module of ours and no other (or these modules:
#: the MCP SDK has a client side and a server side, and each has its own translating module, because
#: the client hub and the MCP facade are separate features that share nothing but the protocol).
SOLE_IMPORTER: dict[str, str | tuple[str, ...]] = {
    "quickjs": "guest_runtime/quickjs/engine.py",
    "_quickjs": "guest_runtime/quickjs/engine.py",
    "jsonschema": "service/tools/contracts.py",
    "referencing": "service/tools/contracts.py",
    "re2": "service/tools/patterns.py",
    # The SQLite store and the thread that owns its connection (calls, deadlines, errors).
    "sqlite3": ("service/stores/sqlite.py", "service/stores/sqlite_thread.py"),
    # The one place a Redis client is made and its errors translated (the stores use its client).
    "redis": "service/stores/redis_link.py",
    # The demo's travel server is a program of its own (python -m service.demo.travel), not the service.
    "mcp": ("service/mcp/client.py", "service/mcp_server/sdk_server.py", "service/demo/travel.py"),
    "mcp_types": ("service/mcp/client.py", "service/mcp_server/sdk_server.py"),
    "prometheus_client": "service/metrics.py",
    "orjson": "bridge/jsoncodec.py",
    "pydantic_settings": "service/settings.py",
    "opentelemetry": "service/tracing.py",
    "httpx2": "service/outbound_http.py",
    "pyseccomp": "guest_runtime/confinement.py",
    "fastapi_offline": "service/http/docs_pages.py",
    "pydantic_monty": "guest_runtime/monty/engine.py",
    # Monty's wire frames (/v1/monty): the generated module and the one module that decodes with it.
    "google.protobuf": ("service/monty_relay/monty_pb2.py", "service/monty_relay/frames.py"),
    "tree_sitter": "guest_runtime/quickjs/typescript.py",
    "tree_sitter_typescript": "guest_runtime/quickjs/typescript.py",
}


def _modules() -> Iterator[Path]:
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _import_names(path: Path) -> set[str]:
    """Every dotted name a module imports: ``import a.b`` gives ``a.b``, ``from a.b import c`` gives ``a.b.c``
    (``c`` may be a module or a name defined in one); a relative import gives its own top-level package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # "from .x import" / "from .. import" stay inside the package (client/ holds codemode_client)
                names.add(rel.parts[1] if rel.parts[0] == "client" else rel.parts[0])
            elif node.module:
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in (
                "import_module",
                "__import__",
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def _imports(path: Path) -> set[str]:
    """Absolute top-level names a module imports (relative imports resolve to its own package)."""
    return {name.split(".")[0] for name in _import_names(path)}


IMPORTS = {str(p.relative_to(ROOT)): _imports(p) for p in _modules()}


def test_modules_were_found():
    """The scan sees the three packages (guards against a vacuous pass)."""
    for pkg in PACKAGES:
        assert any(m.startswith(pkg + "/") for m in IMPORTS), pkg
    assert "guest_runtime/quickjs/engine.py" in IMPORTS


def test_bridge_imports_only_stdlib_orjson_and_itself():
    """bridge/ imports nothing but the standard library, orjson and bridge."""
    bad = {
        m: sorted(n for n in names if n not in STDLIB | {"orjson", "bridge"})
        for m, names in IMPORTS.items()
        if m.startswith("bridge/")
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_guest_runtime_never_imports_service():
    """guest_runtime/ does not import upward into service."""
    offenders = [m for m, names in IMPORTS.items() if m.startswith("guest_runtime/") and "service" in names]
    assert offenders == []


def test_lower_layers_never_import_upward():
    """bridge imports neither guest_runtime nor service."""
    offenders = [m for m, names in IMPORTS.items() if m.startswith("bridge/") and names & {"guest_runtime", "service"}]
    assert offenders == []


@pytest.mark.parametrize("library", sorted(SOLE_IMPORTER))
def test_third_party_library_has_one_importer(library):
    """Each wrapped third-party library is imported only by its one translating module."""
    importers = sorted(m for m, names in IMPORTS.items() if library in names)
    allowed = SOLE_IMPORTER[library]
    assert set(importers) <= ({allowed} if isinstance(allowed, str) else set(allowed)), importers


# ---- dependencies --------------------------------------------------------------------------------

#: Packages that ship: the service's wheel (pyproject's setuptools include) and the client's (client/).
SHIPPED = PACKAGES + ("client/codemode_client",)
#: Our code that runs only in development (examples/ are documentation, run by the tests).
DEVELOPMENT = ("bench", "tests", "examples")
OURS = {top.split("/")[-1] for top in SHIPPED + DEVELOPMENT}
#: Private modules of other distributions we import on purpose: (our module, private import) -> why.
PRIVATE_IMPORTS_ALLOWED = {
    ("guest_runtime/quickjs/engine.py", "_quickjs"): (
        "the engine's C extension itself, opened with ctypes for the rejection tracker, and used without "
        "the package's wrapper (whose import starts a thread, and a worker confines itself single-threaded); "
        "quickjs-ng is pinned exactly and check_engine() proves the wiring at every worker start"
    ),
}


#: Peers that ``python -m bench peers`` installs into its own cache (bench/peer_install.py) and puts first on
#: its drivers' path: never in the venv, so no project declares them. (driver module, import) -> why.
BENCH_PEER_IMPORTS = {
    ("bench/peer_drivers/quickjs_rs_peer.py", "quickjs_rs"): "quickjs-rs 0.2, a peer installed into .data/bench-peers/",
}


def _all_our_files() -> Iterator[Path]:
    for top in SHIPPED + DEVELOPMENT:
        yield from sorted(p for p in (ROOT / top).rglob("*.py") if "node_modules" not in p.parts)


OUR_IMPORTS = {str(p.relative_to(ROOT)): _import_names(p) for p in _all_our_files()}


def _is_private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def _foreign(name: str) -> bool:
    top = name.split(".")[0]
    return top not in STDLIB and top not in OURS


def test_no_private_module_of_another_distribution():
    """No module of ours imports a ``_``-prefixed module (or name) of a third-party distribution."""
    offenders = sorted(
        (module, name)
        for module, names in OUR_IMPORTS.items()
        for name in names
        if _foreign(name)
        and any(_is_private(seg) for seg in name.split("."))
        and (module, name) not in PRIVATE_IMPORTS_ALLOWED
    )
    assert offenders == []


def test_private_import_scan_sees_private_names():
    """The scan recognises the forms a private import takes (guards the test above against passing vacuously)."""
    assert all(_is_private(s) for s in ("_httpx_utils", "_quickjs", "_x"))
    assert not any(_is_private(s) for s in ("shared", "__future__", "__version__"))
    assert ("guest_runtime/quickjs/engine.py", "_quickjs") in {
        (m, n) for m, names in OUR_IMPORTS.items() for n in names if _is_private(n.split(".")[0])
    }


#: The web frameworks the HTTP layer stands on: their private names are theirs to change in any release.
FRAMEWORKS = ("fastapi", "starlette", "uvicorn")


def _private_names(tree: ast.AST) -> tuple[set[str], list[tuple[int, str]]]:
    """The ``_``-prefixed names a module defines (functions, classes, variables, attributes it assigns), and
    the private attributes it reads (``x._name``, ``getattr(x, "_name")``) with their lines."""
    defined: set[str] = set()
    read: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _is_private(node.name):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _is_private(node.id):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            if isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            else:
                read.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            read.append((node.lineno, node.args[1].value))
    return defined, read


def _framework_privates() -> set[str]:
    names: set[str] = set()
    for distribution in FRAMEWORKS:
        for file in importlib.metadata.files(distribution) or []:
            if file.suffix == ".py":
                names |= _private_names(ast.parse(Path(str(file.locate())).read_text(encoding="utf-8")))[0]
    return names


def _framework_private_reads(tree: ast.AST, theirs: set[str]) -> list[tuple[int, str]]:
    """Reads of a name the frameworks keep private, unless the module defines that name itself."""
    ours, read = _private_names(tree)
    return [(line, name) for line, name in read if name in theirs and name not in ours]


def test_no_module_of_ours_reads_a_private_attribute_of_the_web_frameworks():
    """No shipped module reads a ``_name`` that FastAPI, Starlette or uvicorn define (an attribute, a
    function, a module variable), directly or through ``getattr``: we extend them through public hooks only,
    so their releases can move within the ranges pyproject.toml admits."""
    theirs = _framework_privates()
    offenders = [
        (str(path.relative_to(ROOT)), line, name)
        for top in SHIPPED
        for path in sorted((ROOT / top).rglob("*.py"))
        for line, name in _framework_private_reads(ast.parse(path.read_text(encoding="utf-8")), theirs)
    ]
    assert offenders == []


def test_framework_private_read_scan_sees_private_reads():
    """The scan knows the frameworks' private names and finds reads of them, through ``getattr`` too
    (guards the test above against passing vacuously)."""
    theirs = _framework_privates()
    assert {"_send", "_receive"} <= theirs  # starlette's Request keeps its channels there
    probe = ast.parse('def f(request, app):\n    request._send\n    getattr(app, "_receive", None)\n')
    assert _framework_private_reads(probe, theirs) == [(2, "_send"), (3, "_receive")]
    own = ast.parse("class C:\n    def f(self, other):\n        self._send = 1\n        return other._send\n")
    assert _framework_private_reads(own, theirs) == []  # a name the module defines is its own


def _distribution_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return _normalised(match.group(0))


def _normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
CLIENT_PYPROJECT = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIME_REQUIREMENTS = {_distribution_name(r): r for r in PYPROJECT["dependencies"]}
CLIENT_REQUIREMENTS = {_distribution_name(r): r for r in CLIENT_PYPROJECT["dependencies"]}
CLIENT_EXTRAS = {_distribution_name(r) for extra in CLIENT_PYPROJECT["optional-dependencies"].values() for r in extra}
DEV_REQUIREMENTS = {_distribution_name(r): r for r in PYPROJECT["optional-dependencies"]["dev"]}
#: Client modules that import an optional framework, and the extra of client/pyproject.toml that installs it.
EXTRA_OF = {
    "client/codemode_client/pydantic_ai_toolset.py": "pydantic-ai",
    "client/codemode_client/langchain_tool.py": "langchain",
    "client/codemode_client/openai_agents_tool.py": "openai-agents",
    "client/codemode_client/fastmcp_sandbox.py": "fastmcp",
}


def _declared_for(module: str) -> set[str]:
    """The distributions `module` may import: its own project's dependencies (and extra), or for
    development code both projects' with every extra and the service's ``dev`` extra."""
    if module.startswith("client/"):
        extra = CLIENT_PYPROJECT["optional-dependencies"].get(EXTRA_OF.get(module, ""), [])
        return set(CLIENT_REQUIREMENTS) | {_distribution_name(r) for r in extra}
    if module.split("/")[0] in DEVELOPMENT:
        return set(RUNTIME_REQUIREMENTS) | set(DEV_REQUIREMENTS) | set(CLIENT_REQUIREMENTS) | CLIENT_EXTRAS
    return set(RUNTIME_REQUIREMENTS)


def test_every_imported_distribution_is_declared():
    """Each third-party import resolves to a distribution its project declares: the service's code in
    pyproject.toml's ``dependencies``, the client's in client/pyproject.toml's (an adapter also in its
    extra), tests, benchmarks and examples in either or in the service's ``dev`` extra."""
    owners = importlib.metadata.packages_distributions()
    missing = set()
    for module, names in OUR_IMPORTS.items():
        declared = _declared_for(module)
        for name in filter(_foreign, names):
            top = name.split(".")[0]
            distributions = {_normalised(d) for d in owners.get(top, [f"<nothing installed provides {top}>"])}
            if not distributions & declared and (module, top) not in BENCH_PEER_IMPORTS:
                missing.add((module, top, ", ".join(sorted(distributions))))
    assert sorted(missing) == []


def test_the_two_distributions_share_nothing():
    """The service's wheel depends on nothing of the client and the client only on httpx; neither ships
    the other's package, nor ``examples``."""
    assert not {"codemode-client", "httpx"} & set(RUNTIME_REQUIREMENTS)
    assert set(CLIENT_REQUIREMENTS) == {"httpx"}
    service_packages = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert service_packages["packages"]["find"]["include"] == ["service*", "guest_runtime*", "bridge*"]
    client_packages = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    assert client_packages["setuptools"]["packages"]["find"]["include"] == ["codemode_client*"]


def test_mcp_is_pinned_to_the_major_version_the_client_is_written_for():
    """The MCP client uses the 2.x SDK API: pyproject excludes 1.x and 3.x and admits what is installed."""
    spec = SpecifierSet(RUNTIME_REQUIREMENTS["mcp"][len("mcp") :])
    assert spec.contains(importlib.metadata.version("mcp"))
    assert not spec.contains("1.99.0") and not spec.contains("3.0.0")
    assert not spec.contains("2.0.0")  # Client(mode=..., cache=...) is newer than 2.0


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in _modules()}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports there never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _module_imports(name: str, path: Path, *, typing_only: bool = True) -> set[str]:
    """Our modules this one imports: top level or inside a function alike, and under TYPE_CHECKING
    unless ``typing_only`` is false (those imports never run, so they cannot make an import circle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    skipped = set() if typing_only else _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
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
#: The imports that run (TYPE_CHECKING blocks left out): the graph import circles are looked for in.
RUNTIME_GRAPH = {name: _module_imports(name, path, typing_only=False) for name, path in MODULES.items()}


def _reaches(start: str, graph: dict[str, set[str]] = RUNTIME_GRAPH) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return seen


def test_module_graph_sees_imports_of_every_kind():
    """The scan resolves relative, absolute and submodule imports (guards against a vacuous pass)."""
    assert "service.runtime.dispatch" in MODULE_GRAPH["service.runtime.cell"]  # from .dispatch import ...
    assert "service.errors" in MODULE_GRAPH["service.auth"]  # from service.errors import ...
    assert "bridge.jsoncodec" in MODULE_GRAPH["guest_runtime.worker"]  # from bridge import jsoncodec
    assert MODULE_GRAPH["service.cli"]


def test_no_import_circles():
    """No module imports another that imports it back, directly or through others: neither with the
    imports that run nor with ``TYPE_CHECKING`` imports (which never run, but tie two modules together
    as much: a module that needs another's type for its own shape belongs with it, or the type does)."""
    assert sorted(name for name in RUNTIME_GRAPH if name in _reaches(name)) == []
    assert sorted(name for name in MODULE_GRAPH if name in _reaches(name, MODULE_GRAPH)) == []


def test_type_checking_imports_are_seen_and_left_out_of_the_runtime_graph():
    """The circle scan tells a ``TYPE_CHECKING`` import from one that runs (guards the rule above)."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nimport b\n"
    tree = ast.parse(source)
    skipped = _type_checking_nodes(tree)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    kept = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import) and id(node) not in skipped
        for alias in node.names
    }
    assert imported == {"a", "b"} and kept == {"b"}


#: The modules that may import the HTTP face: the face itself, the composition root that mounts the
#: MCP facade on it, and the command line that serves it.  Every other face shares ``service.api``.
HTTP_IMPORTERS = ("service.http", "service.app", "service.cli")


def test_only_the_composition_root_imports_the_http_face():
    """Nothing outside ``service/http/``, ``service/app.py`` and the CLI imports ``service.http``: the wire
    models and the exec recipe live in ``service.api``, and ``/mcp`` is mounted by the composition root."""
    offenders = sorted(
        (name, target)
        for name, targets in MODULE_GRAPH.items()
        if not any(name == allowed or name.startswith(allowed + ".") for allowed in HTTP_IMPORTERS)
        for target in targets
        if target.startswith("service.http.") or target == "service.http"
    )
    assert offenders == []
    assert "service.http.app" in MODULE_GRAPH["service.app"]  # the scan sees the root's own import


# Measured on ruff-formatted code (tests/test_lint.py keeps the tree formatted).
MAX_MODULE_LINES = 600


def test_no_module_over_the_line_cap():
    """Every Python module of the three packages stays under the line cap (split by concern instead)."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_settings_load_no_mcp_code_and_http_mounts_no_mcp_face():
    """Reading settings imports nothing of the MCP client (its server entries are ``service.settings_mcp``),
    and the HTTP face reaches the MCP facade only through the composition root that mounts it."""
    assert not {m for m in _reaches("service.settings") if m.startswith("service.mcp")}
    http = [name for name in MODULE_GRAPH if name.startswith("service.http.")]
    assert http and not {m for name in http for m in _reaches(name) if m.startswith("service.mcp_server")}
    assert "service.mcp_server.sdk_server" in _reaches("service.app")


#: What may turn bytes into code or objects of the writer's choosing, or run the multiprocessing machinery
#: (its pickled pipes, its root-owned resource tracker): nothing that reads a confined process may use them.
UNSAFE_DECODING = (
    "pickle",
    "_pickle",
    "copyreg",
    "marshal",
    "shelve",
    "multiprocessing",
    "_multiprocessing",
    "concurrent.futures.process",
    "concurrent.futures.ProcessPoolExecutor",
)


def _unsafe(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == u or n.startswith(u + ".") for u in UNSAFE_DECODING))


def test_no_pickle_no_multiprocessing_anywhere_in_the_service():
    """No module of bridge, guest_runtime or service imports pickle (or its kin), multiprocessing or a
    process pool: what a helper or worker writes is JSON frames, counted before they are decoded."""
    offenders = {m: _unsafe(names) for m, names in OUR_IMPORTS.items() if m.startswith(PACKAGES) and _unsafe(names)}
    assert offenders == {}


def test_the_unsafe_decoding_scan_sees_every_spelling(tmp_path, monkeypatch):
    """The scan above catches the ways the old helper reached a process pool (guards against a vacuous pass)."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    source = (
        "import pickle\nimport multiprocessing.resource_tracker\n"
        "from concurrent.futures import ProcessPoolExecutor\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "import importlib\nimportlib.import_module('_pickle')\n"
    )
    (tmp_path / "m.py").write_text(source)
    found = _unsafe(_import_names(tmp_path / "m.py"))
    assert found == [
        "_pickle",
        "concurrent.futures.ProcessPoolExecutor",
        "multiprocessing.resource_tracker",
        "pickle",
    ]
