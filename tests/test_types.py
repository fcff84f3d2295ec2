"""Static type checks: mypy over the three packages and the client, strict for all but service/.

Two runs, each with its own configuration and cache: the service's (pyproject.toml) over bridge/,
guest_runtime/, service/ and the client without its framework adapters, and the client's own
(client/pyproject.toml, every --strict flag) over the whole client, the frameworks' types followed.
The frameworks' types are most of a cold run's cost (about 30 of 45 s of CPU), so the service's
run, the one every change needs, stays at about 13 s cold; an incremental re-run takes a few seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# The installed packages are this interpreter's, whatever python_version the checks target.
MYPY = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--python-executable", sys.executable]


def test_mypy_finds_no_type_errors():
    """`mypy` (configured in pyproject.toml) reports no error in bridge/, guest_runtime/, service/ or
    client/codemode_client/ (its framework adapters aside: the next test checks them)."""
    result = subprocess.run(
        [*MYPY, "bridge", "guest_runtime", "service", "client/codemode_client"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_checks_the_client_and_its_adapters_against_the_frameworks():
    """The client's own run (client/pyproject.toml, strict) reports no error in any client module, the
    three framework adapters included, with pydantic-ai's, LangChain's and the Agents SDK's types followed."""
    result = subprocess.run(MYPY, cwd=ROOT / "client", capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every module was checked, the adapters among them: mypy names the count of files it checked.
    modules = len(list((ROOT / "client" / "codemode_client").rglob("*.py")))
    assert f"no issues found in {modules} source files" in result.stdout, result.stdout
