"""The MCP guide's samples of the facade's flows run as written, against the server each one names.

A sample is a Python fence after ``<!-- mcp-sample: NAME -->`` in docs/guide/mcp.md (the docs' own runner,
tests/docs/test_samples.py, runs ``<!-- sample: ... -->`` fences against ``codemode serve --demo``; these
flows need a server configured for them).  The sample names ``127.0.0.1:8000``; the test points it at the
live server, and checks what its ``print(...)  # expected`` comments say (``…`` stands for anything).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live_server import ROOT, codemode_serve

pytestmark = pytest.mark.slow

GUIDE = ROOT / "docs" / "guide" / "mcp.md"
SAMPLE = re.compile(r"^<!-- mcp-sample: (?P<name>[\w-]+) -->\n```python\n(?P<body>.*?)^```$", re.M | re.S)
#: The server each sample needs.
CONFIGS = {
    "approvals": """
[tools]
plugins = ["service.demo.shipping"]
approve = ["quote_shipping"]
""",
    "tasks": "",
}


def _samples() -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in SAMPLE.finditer(GUIDE.read_text(encoding="utf-8"))}


def test_every_guide_sample_has_a_server() -> None:
    """Each marked sample is found and has a configuration here (a sample nobody runs would go stale)."""
    assert set(_samples()) == set(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_guide_sample_runs(name: str, tmp_path: Path) -> None:
    body = _samples()[name]
    assert "127.0.0.1:8000" in body
    (tmp_path / "server").mkdir()
    with codemode_serve(tmp_path / "server", config=CONFIGS[name]) as base:
        script = tmp_path / "sample.py"
        script.write_text(body.replace("127.0.0.1:8000", base.removeprefix("http://")), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = [m.group(1) for m in re.finditer(r"print\(.*\)\s+# (.+)$", body, re.M)]
    printed = done.stdout.splitlines()
    # A print inside a callback runs once per call: each expected line matches in order, repeats allowed.
    want = iter(expected)
    current = next(want)
    for line in printed:
        if not _matches(line, current):
            current = next(want)
        assert _matches(line, current), (printed, expected)
    assert next(want, None) is None, (printed, expected)


def _matches(line: str, want: str) -> bool:
    return re.fullmatch(".*".join(map(re.escape, want.split("…"))), line) is not None
