"""The samples the README and the docs mark as runnable run against a live `codemode serve --demo`.

A sample is marked with ``<!-- sample: shell|python|cell|python-cell -->`` before its fence (tests/docs/pages.py).
Samples name the default address (``localhost:8000`` or ``127.0.0.1:8000``); the test points them at
the live server's port instead, and nothing else of the sample is changed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.docs.pages import ROOT, Sample, pages, samples
from tests.support.live_server import codemode_serve

SAMPLES = samples()
DEFAULT_ADDRESS = re.compile(r"(localhost|127\.0\.0\.1):8000")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("samples"), env={"CODEMODE_DEMO": "true"}) as url:
        yield url


def _pointed(body: str, base: str) -> str:
    address = base.removeprefix("http://")
    assert DEFAULT_ADDRESS.search(body), "a shell or Python sample names the service's address"
    return DEFAULT_ADDRESS.sub(address, body)


def test_the_readme_tour_is_marked() -> None:
    """The README's tour has a runnable curl, cell and Python sample (so the tour is what runs)."""
    kinds = {s.kind for s in SAMPLES if s.page == "README.md"}
    assert kinds == {"shell", "python", "cell"}, kinds


def test_every_sample_mark_is_read() -> None:
    """Each ``<!-- sample: ... -->`` comment marks a fence the runner finds (a typo in the kind, or a
    blank line before the fence, would otherwise leave the sample silently unrun)."""
    marks = sum(len(re.findall(r"^<!-- sample:", path.read_text(encoding="utf-8"), re.M)) for path in pages())
    assert marks == len(SAMPLES) > 0


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_sample_runs(sample: Sample, base: str, tmp_path: Path) -> None:
    """The sample runs as written: a shell sample prints a completed envelope, a Python sample exits 0
    and prints what its ``print(...)  # expected`` comments say (``…`` stands for anything), a cell
    completes."""
    if sample.kind in ("cell", "python-cell"):
        language = "python" if sample.kind == "python-cell" else "javascript"
        envelope = httpx.post(f"{base}/v1/exec", json={"code": sample.body, "language": language}, timeout=60).json()
        assert envelope["status"] == "completed", envelope
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if sample.kind == "shell":
        argv = ["sh", "-ec", _pointed(sample.body, base)]
    else:
        script = tmp_path / "sample.py"
        script.write_text(_pointed(sample.body, base), encoding="utf-8")
        argv = [sys.executable, str(script)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if sample.kind == "shell":
        assert json.loads(proc.stdout)["status"] == "completed", proc.stdout[-3000:]
    else:
        expected = [m.group(1) for m in re.finditer(r"print\(.*\)\s+# (.+)$", sample.body, re.M)]
        printed = proc.stdout.splitlines()
        assert len(printed) == len(expected), (printed, expected)
        for line, want in zip(printed, expected):
            assert re.fullmatch(".*".join(map(re.escape, want.split("…"))), line), (line, want)
