"""The client package stands alone: only the standard library and httpx, nothing of the service."""

from __future__ import annotations

import subprocess
import sys

from tests.test_layering import MAX_MODULE_LINES, ROOT, STDLIB, _imports

CLIENT = ROOT / "client" / "codemode_client"
CLIENT_IMPORTS = {str(p.relative_to(ROOT)): _imports(p) for p in sorted(CLIENT.rglob("*.py"))}


def test_client_modules_were_found():
    """The scan sees the client's modules, the transport among them (guards against a vacuous pass)."""
    assert "client/codemode_client/transport.py" in CLIENT_IMPORTS
    assert "httpx" in CLIENT_IMPORTS["client/codemode_client/transport.py"]


#: The framework adapters, each an optional extra: the one module importing its framework (and pydantic,
#: which every one of these frameworks is built on).
ADAPTERS = {
    "client/codemode_client/pydantic_ai_toolset.py": {"pydantic_ai", "pydantic"},
    "client/codemode_client/langchain_tool.py": {"langchain_core", "pydantic"},
    "client/codemode_client/openai_agents_tool.py": {"agents"},
    "client/codemode_client/fastmcp_sandbox.py": {"fastmcp"},
}
FRAMEWORKS = ("pydantic_ai", "langchain_core", "langchain", "langgraph", "agents", "fastmcp")


def test_client_imports_only_stdlib_httpx_and_itself():
    """No client module imports service, bridge, guest_runtime or any other third-party library; an adapter
    imports its own framework besides."""
    bad = {
        m: sorted(names - STDLIB - {"httpx", "codemode_client"} - ADAPTERS.get(m, set()))
        for m, names in CLIENT_IMPORTS.items()
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_each_framework_has_one_importer_in_the_client():
    """Each framework is imported by its adapter alone."""
    for framework in FRAMEWORKS:
        importers = sorted(m for m, names in CLIENT_IMPORTS.items() if framework in names)
        assert importers == [m for m, allowed in ADAPTERS.items() if framework in allowed], framework


def test_the_client_imports_with_no_framework_installed():
    """With every framework made unimportable, codemode_client and its run() machinery import; an adapter
    refuses with an ImportError naming the extra to install."""
    probe = (
        "import sys\n"
        f"for name in {FRAMEWORKS!r}: sys.modules[name] = None\n"
        "import codemode_client, codemode_client.adapters\n"
        "for module, extra in (('pydantic_ai_toolset', 'pydantic-ai'), ('langchain_tool', 'langchain'),"
        " ('openai_agents_tool', 'openai-agents'), ('fastmcp_sandbox', 'fastmcp')):\n"
        "    try:\n"
        "        __import__('codemode_client.' + module)\n"
        "    except ImportError as exc:\n"
        '        assert f"codemode-client[{extra}]" in str(exc), exc\n'
        "    else:\n"
        "        raise AssertionError(module + ' imported without its framework')\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_httpx_has_one_importer_in_the_client():
    """httpx is imported by the transport module alone."""
    assert sorted(m for m, names in CLIENT_IMPORTS.items() if "httpx" in names) == [
        "client/codemode_client/transport.py"
    ]


def test_importing_the_client_loads_nothing_of_the_service():
    """In a fresh interpreter, importing codemode_client leaves service, bridge, guest_runtime and pydantic unloaded."""
    probe = (
        "import sys, codemode_client; "
        "print(sorted(m for m in ('service', 'bridge', 'guest_runtime', 'pydantic', 'fastapi') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_no_client_module_over_the_line_cap():
    """Every client module stays under the same line cap as the service's."""
    long = {
        m: n
        for m in CLIENT_IMPORTS
        if (n := len((ROOT / m).read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
