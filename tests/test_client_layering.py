"""The client package stands alone: only the standard library and httpx, nothing of the service."""

from __future__ import annotations

import subprocess
import sys

from tests.test_layering import MAX_MODULE_LINES, ROOT, STDLIB, _imports

CLIENT = ROOT / "codemode_client"
CLIENT_IMPORTS = {str(p.relative_to(ROOT)): _imports(p) for p in sorted(CLIENT.rglob("*.py"))}


def test_client_modules_were_found():
    """The scan sees the client's modules, the transport among them (guards against a vacuous pass)."""
    assert "codemode_client/transport.py" in CLIENT_IMPORTS
    assert "httpx" in CLIENT_IMPORTS["codemode_client/transport.py"]


def test_client_imports_only_stdlib_httpx_and_itself():
    """No client module imports service, bridge, guest_runtime or any other third-party library."""
    bad = {m: sorted(names - STDLIB - {"httpx", "codemode_client"}) for m, names in CLIENT_IMPORTS.items()}
    assert {m: n for m, n in bad.items() if n} == {}


def test_httpx_has_one_importer_in_the_client():
    """httpx is imported by the transport module alone."""
    assert sorted(m for m, names in CLIENT_IMPORTS.items() if "httpx" in names) == ["codemode_client/transport.py"]


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
