"""Fixtures for the declaration renderers: the real TypeScript compiler."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.support.tsc import run_tsc


@pytest.fixture
def tsc_run(tmp_path: Path) -> Callable[[Mapping[str, str]], subprocess.CompletedProcess[str]]:
    """Write files into a fresh project directory and run the real `tsc --strict --noEmit` on it."""
    counter = iter(range(1_000_000))

    def run(files: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return run_tsc(tmp_path / f"project{next(counter)}", files)

    return run


@pytest.fixture
def tsc_check(tsc_run) -> Callable[[Mapping[str, str]], None]:
    """Like `tsc_run`, but fail the test with tsc's output on any error."""

    def check(files: Mapping[str, str]) -> None:
        completed = tsc_run(files)
        if completed.returncode != 0:
            pytest.fail(f"tsc rejected the declarations:\n{completed.stdout}{completed.stderr}")

    return check
