"""The real TypeScript compiler for declaration tests (installed by scripts/test into tests/node)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
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


def run_tsc(root: Path, files: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Write ``files`` and a strict tsconfig under ``root`` and run ``tsc --noEmit --strict`` on them."""
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (root / "tsconfig.json").write_text(json.dumps(TSCONFIG), encoding="utf-8")
    return check_project(root / "tsconfig.json", "--noEmit", "--strict")


def check_project(config: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run ``tsc -p config`` (its own compiler options, then ``options``); errors are on stdout, one a line."""
    if not TSC.exists():
        pytest.fail(f"TypeScript compiler not found at {TSC}; run `npm ci --prefix tests/node` first.")
    return subprocess.run(
        [str(TSC), "-p", str(config), "--pretty", "false", *options],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=config.parent,
    )
