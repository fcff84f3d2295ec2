"""The two wheels, built and installed into a clean virtualenv, work on their own.

`scripts/build-dist` (the release artefacts) builds the service's sdist and wheel (`codemode`) and the
client's (`codemode-client`, client/); a fresh venv installs both from those files (their dependencies from the package index),
and everything below runs from that venv with the repository off `sys.path`: a cell through
`codemode exec` (the guest prelude's `.js` files ship), and the client, imported from its wheel,
against `codemode serve --demo` (the demo's plugin and MCP server ship inside the service).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bench.servers import free_port
from tests.support.live_server import live_process

ROOT = Path(__file__).resolve().parents[2]
# Building two wheels and installing the service's dependencies into a fresh venv takes minutes.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(argv: list[str], cwd: Path, timeout: float = 600, stdin: str | None = None) -> str:
    # Off the repository: no PYTHONPATH, and a working directory outside it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("CODEMODE_")}
    env["CODEMODE_DATA_DIR"] = str(cwd / "data")
    result = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{argv[:3]} exited {result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    # The release script: each sdist first, then its wheel from the unpacked sdist (build's default), so no
    # stale file of the checkout's build/ reaches the wheel, and the sdist is proven complete.
    _run(["bash", str(ROOT / "scripts" / "build-dist"), str(out)], out)
    found = {path.name.split("-")[0]: path for path in out.glob("*.whl")}
    assert set(found) == {"codemode", "codemode_client"}, sorted(out.iterdir())
    return found


@pytest.fixture(scope="module")
def venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("clean")
    _run([sys.executable, "-m", "venv", str(home / "venv")], home)
    pip = [str(home / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, str(wheels["codemode"]), str(wheels["codemode_client"])], home)
    return home


#: A demo plugin tool and the demo MCP server, both from the service's wheel.
TOUR = """
const quote = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
const weather = await MCP.travel.forecast({city: "Paris", days: 2});
return [quote.currency, weather.structuredContent.days.length];
"""


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_service_wheel_ships_the_runtime_and_nothing_of_the_client_or_examples(wheels: dict[str, Path]) -> None:
    """The service's wheel holds the prelude's .js files, py.typed and the demo, and no examples or client."""
    names = _names(wheels["codemode"])
    assert any(n.startswith("guest_runtime/quickjs/prelude/") and n.endswith(".js") for n in names)
    # The three C extensions, built from the sdist's plain_data.c, json_syntax.c and source_scan.c (scripts/test
    # installs gcc first).
    assert any(n.startswith("guest_runtime/quickjs/_plain_data.") and n.endswith(".so") for n in names)
    assert any(n.startswith("bridge/_json_syntax.") and n.endswith(".so") for n in names)
    assert any(n.startswith("guest_runtime/monty/_source_scan.") and n.endswith(".so") for n in names)
    assert {"service/py.typed", "service/demo/shipping.py", "service/demo/travel.py"} <= names
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"bridge", "guest_runtime", "service"}


def test_client_wheel_ships_the_client_alone(wheels: dict[str, Path]) -> None:
    """The client's wheel holds codemode_client (with py.typed) and nothing else; it requires httpx only."""
    names = _names(wheels["codemode_client"])
    assert "codemode_client/py.typed" in names
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"codemode_client"}
    with zipfile.ZipFile(wheels["codemode_client"]) as archive:
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    required = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert [line.split()[1] for line in required] == ["httpx<1,>=0.27"]


def test_installed_codemode_exec_runs_a_cell(venv: Path) -> None:
    """`codemode exec` from the clean venv runs a cell in a real worker: the installed prelude works."""
    stdout = _run([str(venv / "venv" / "bin" / "codemode"), "exec", "-"], venv, stdin='text("hi"); return 6 * 7')
    envelope = json.loads(stdout)
    assert envelope["status"] == "completed", envelope
    assert envelope["value"] == 42


def test_installed_client_runs_cells_against_the_installed_demo_server(venv: Path) -> None:
    """The client from its wheel, against `codemode serve --demo` from the service's wheel: a demo plugin tool
    and the demo MCP server answer, and both versions come from the installed metadata."""
    python = str(venv / "venv" / "bin" / "python")
    port = free_port()
    argv = [str(venv / "venv" / "bin" / "codemode"), "serve", "--demo", "--host", "127.0.0.1", "--port", str(port)]
    probe = f"""
TOUR = {TOUR!r}
import json, codemode_client, service
from codemode_client import Client
assert "/venv/" in codemode_client.__file__ and "/venv/" in service.__file__, (codemode_client.__file__, service.__file__)
with Client("http://127.0.0.1:{port}") as cm:
    env = cm.run(TOUR, timeout_ms=30000)
print(json.dumps([codemode_client.__version__, service.__version__, env.status, env.value]))
"""
    with live_process(
        [*argv, "--workers", "1", "--log-level", "warning"],
        f"http://127.0.0.1:{port}/healthz",
        venv,
        env={"PYTHONPATH": ""},
    ):
        client_version, service_version, status, value = json.loads(_run([python, "-c", probe], venv))
    assert (status, value) == ("completed", ["USD", 2]), value
    assert client_version == _project_version(ROOT / "client") and service_version == _project_version(ROOT)


def _project_version(project: Path) -> str:
    import tomllib

    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
