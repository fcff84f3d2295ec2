"""Fixtures for the declaration renderers: the real TypeScript compiler."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

TSC = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin" / "tsc"
TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "noEmit": True,
        "target": "es2022",
        "lib": ["es2022"],
        "types": [],
        "skipLibCheck": False,
    },
    "include": ["**/*.ts"],
}


@pytest.fixture
def tsc_run(tmp_path: Path) -> Callable[[Mapping[str, str]], subprocess.CompletedProcess[str]]:
    """Write files into a fresh project directory and run the real `tsc --strict --noEmit` on it."""
    if not TSC.exists():
        pytest.fail(f"TypeScript compiler not found at {TSC}; run `npm ci --prefix tests/node` first.")
    counter = iter(range(1_000_000))

    def run(files: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        root = tmp_path / f"project{next(counter)}"
        for relative, text in files.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (root / "tsconfig.json").write_text(json.dumps(TSCONFIG), encoding="utf-8")
        return subprocess.run(
            [str(TSC), "-p", str(root), "--pretty", "false"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=root,
        )

    return run


@pytest.fixture
def tsc_check(tsc_run) -> Callable[[Mapping[str, str]], None]:
    """Like `tsc_run`, but fail the test with tsc's output on any error."""

    def check(files: Mapping[str, str]) -> None:
        completed = tsc_run(files)
        if completed.returncode != 0:
            pytest.fail(f"tsc rejected the declarations:\n{completed.stdout}{completed.stderr}")

    return check
