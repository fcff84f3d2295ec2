"""The quick start on a real socket: `codemode serve` answers the quick-start curl body."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.live_server import codemode_serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m service.cli serve` on a free loopback port, data dir in tmp; yields its base URL."""
    with codemode_serve(tmp_path_factory.mktemp("served"), ready_path="/readyz") as base:
        yield base


def test_quick_start_curl_body_over_a_real_socket(served):
    """POST the quick start's curl body (README.md): completed, value 2, output [text "hi"]."""
    r = httpx.post(
        served + "/v1/exec",
        content=b'{"code":"text(\\"hi\\"); return 1+1"}',
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["status"] == "completed"
    assert env["value"] == 2
    assert env["output"] == [{"type": "text", "text": "hi"}]
