"""Static type checks: mypy over the three packages and the client, strict for all but service/.

The rules live in pyproject.toml ([tool.mypy]); the incremental cache in .mypy_cache keeps a
re-run to a few seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_type_errors():
    """`mypy` (configured in pyproject.toml) reports no error in bridge/, guest_runtime/, service/ or codemode_client/."""
    # The installed packages are this interpreter's, whatever python_version the checks target.
    command = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--python-executable", sys.executable]
    result = subprocess.run(
        [*command, "bridge", "guest_runtime", "service", "codemode_client"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
