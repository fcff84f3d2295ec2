"""A confined process starts with nothing of the service's by accident: environment, directory, imports.

Each test starts a real worker the way the pool does (``start_worker``), from a service whose working
directory and environment an attacker prepared, and reads back how the worker was started (the
test-only payload reports it, ``tests/support/compromised_worker.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.messages import TEST_PAYLOAD_VARIABLE, WorkerOptions
from service.process_launch import CONFINED_ENVIRONMENT
from service.runtime.workers.process import start_worker

ROOT = Path(__file__).resolve().parents[4]
OPTIONS: WorkerOptions = {"frame_cap": 1 << 20, "sandbox": {"mode": "off"}}


def _plant(directory: Path, marker: Path) -> None:
    """A ``bridge`` package and a ``sitecustomize`` in ``directory`` that leave ``marker`` behind if imported."""
    package = directory / "bridge"
    package.mkdir(parents=True)
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    (package / "__init__.py").write_text(code)
    (directory / "sitecustomize.py").write_text(code)
    (directory / "usercustomize.py").write_text(code)


def _launch_report() -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        worker = await start_worker(OPTIONS, OPTIONS["frame_cap"], test_payload=json.dumps({"probes": ["launch"]}))
        try:
            frame: Any = await worker.recv()
            return frame["results"]["launch"]  # type: ignore[no-any-return]
        finally:
            worker.kill()
            await worker.proc.wait()

    return asyncio.run(scenario())


@pytest.fixture
def hostile_service_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service runs in a directory holding planted packages, with secrets and a planted PYTHONPATH."""
    marker = tmp_path / "planted-code-ran"
    _plant(tmp_path / "cwd", marker)
    _plant(tmp_path / "pythonpath", marker)
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pythonpath"))
    monkeypatch.setenv("PYTHONSTARTUP", str(tmp_path / "cwd" / "sitecustomize.py"))
    monkeypatch.setenv("CODEMODE_SECRET_FOR_TEST", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("LANG", "C.UTF-8")
    return marker


def test_a_worker_imports_no_code_from_the_service_directory_or_its_pythonpath(hostile_service_environment):
    """A ``bridge/__init__.py`` and a ``sitecustomize.py`` planted in the service's working directory and in
    its PYTHONPATH are never imported by a new worker, which starts in ``/`` in isolated mode and imports
    the installed code."""
    report = _launch_report()
    assert not hostile_service_environment.exists(), "planted code ran in the worker"
    assert report["cwd"] == "/"
    assert report["isolated"] == 1
    planted = str(hostile_service_environment.parent)
    assert not [p for p in report["path"] if p.startswith(planted) or p in ("", ".")], report["path"]


def test_a_worker_inherits_only_the_allow_listed_environment(hostile_service_environment):
    """The service's secrets and PYTHON* variables stay behind: the worker's environment is the locale
    (as allowed) and the test payload's own variable."""
    report = _launch_report()
    # TZ: the worker sets it itself (guests see UTC), before the payload looks.
    assert set(report["environ"]) <= set(CONFINED_ENVIRONMENT) | {TEST_PAYLOAD_VARIABLE, "TZ"}
    assert "LANG" in report["environ"]  # allowed ones do pass


def test_the_worker_module_is_the_installed_one():
    """The check above is meaningful only if the installed code is importable without the working directory:
    an isolated interpreter in ``/`` finds the packages where they are installed."""
    found = asyncio.run(_isolated_import("guest_runtime.worker"))
    assert Path(found).resolve().is_relative_to(ROOT), found


async def _isolated_import(module: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        f"import {module} as m; print(m.__file__)",
        cwd="/",
        env={},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return out.decode().strip()
