"""Static checks that catch bugs before a test does (ruff lint rules), and the one code format (ruff format)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_no_undefined_names_or_unused_imports():
    """`ruff check` (rules in pyproject.toml) passes over every Python package and the tests."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "service",
            "bridge",
            "guest_runtime",
            "client",
            "examples",
            "bench",
            "tests",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_tree_is_ruff_formatted():
    """`ruff format --check` finds nothing to change: the tree has one layout, so the line cap measures code."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pre_commit_runs_scripts_check_from_a_local_hook():
    """`.pre-commit-config.yaml` is valid and its only hook is local (nothing fetched): `scripts/check`,
    an executable script that runs ruff, the format check, mypy and the fast lane."""
    config = ROOT / ".pre-commit-config.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    repos = [line.split(":", 1)[1].strip() for line in config.read_text().splitlines() if "- repo:" in line]
    assert repos == ["local"], repos
    assert "entry: scripts/check" in config.read_text()
    check = ROOT / "scripts" / "check"
    assert check.stat().st_mode & 0o111, "scripts/check is not executable"
    steps = check.read_text()
    for step in ("ruff check", "ruff format --check", "mypy", '-m "not slow"'):
        assert step in steps, step
