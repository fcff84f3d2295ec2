"""Operation ids are stable and readable, and a client generated from ``/openapi.json`` uses them.

openapi-python-client (a dev dependency) generates a Python client from a real ``codemode serve``'s
document; the test imports it and runs a cell with it against the same server.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import codemode_serve

#: Every operation of the document, by method and path: what generated clients name their functions.
OPERATION_IDS = {
    ("post", "/v1/exec"): "exec_cell",
    ("post", "/v1/cells/{cell_id}/wait"): "wait_cell",
    ("post", "/v1/cells/{cell_id}/cancel"): "cancel_cell",
    ("get", "/v1/cells/{cell_id}"): "get_cell",
    ("get", "/v1/cells/{cell_id}/events"): "stream_cell_events",
    ("get", "/v1/catalog"): "get_catalog",
    ("get", "/v1/api/files"): "list_api_files",
    ("get", "/v1/api/files/{name}"): "get_api_file",
    ("get", "/v1/api/files/{dir}/{name}"): "get_nested_api_file",
    ("delete", "/v1/sessions/{session_id}/runs/{run_id}"): "end_run",
    ("get", "/v1/sessions/{session_id}/runs/{run_id}"): "get_run",
    ("get", "/v1/sessions/{session_id}/store"): "get_session_store",
    ("delete", "/v1/sessions/{session_id}"): "delete_session",
    ("get", "/healthz"): "get_health",
    ("get", "/readyz"): "get_readiness",
    ("get", "/metrics"): "get_metrics",
    ("get", "/v1/tool-description"): "get_tool_description",
}


#: The generated package: written to the test's tmp_path at run time, so no distribution provides it.
GENERATED = "codemode_api"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("generated")) as url:
        yield url


def test_every_operation_has_its_pinned_readable_id(server: str) -> None:
    """The document's operation ids are exactly the pinned ones: snake_case verbs, none spelling a path."""
    document = httpx.get(f"{server}/openapi.json", timeout=10).json()
    found = {(method, path): op["operationId"] for path, ops in document["paths"].items() for method, op in ops.items()}
    assert found == OPERATION_IDS
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", name) for name in found.values())


@pytest.mark.slow
def test_a_generated_client_runs_a_cell(server: str, tmp_path: Path) -> None:
    """openapi-python-client's client has a module per operation id; its exec_cell runs a cell and get_cell
    reads it back."""
    (tmp_path / "openapi.json").write_text(httpx.get(f"{server}/openapi.json", timeout=10).text, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    generator = Path(sys.executable).parent / "openapi-python-client"
    argv = [str(generator), "generate", "--path", "openapi.json", "--meta", "none", "--output-path", GENERATED]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = tmp_path / GENERATED / "api" / "cells"
    assert {p.stem for p in cells.glob("*.py")} == {
        "__init__",
        "exec_cell",
        "wait_cell",
        "cancel_cell",
        "get_cell",
        "stream_cell_events",
    }
    sys.path.insert(0, str(tmp_path))
    try:
        api = importlib.import_module(GENERATED)
        exec_cell = importlib.import_module(f"{GENERATED}.api.cells.exec_cell")
        get_cell = importlib.import_module(f"{GENERATED}.api.cells.get_cell")
        models = importlib.import_module(f"{GENERATED}.models")
        with api.Client(base_url=server) as client:
            answer = exec_cell.sync_detailed(client=client, body=models.ExecRequest(code="return 6 * 7"))
            assert answer.status_code == 200, answer.content
            envelope = answer.parsed.to_dict() if hasattr(answer.parsed, "to_dict") else answer.parsed
            assert (envelope["status"], envelope["value"]) == ("completed", 42), envelope
            status = get_cell.sync_detailed(envelope["cell_id"], client=client)
            assert status.status_code == 200 and b'"completed"' in status.content, status.content
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == GENERATED or n.startswith(f"{GENERATED}.")]:
            del sys.modules[name]
