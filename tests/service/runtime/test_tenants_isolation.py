"""Tenants (SPEC §8): API keys scope cells, session stores and saved results; per-tenant concurrency caps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings import ApiKey
from tests.conftest import make_client
from tests.conftest import value_of as value
from tests.support.ports import free_port

KEYS = (ApiKey("key-alpha", "alpha"), ApiKey("key-beta", "beta"))
ALPHA = {"Authorization": "Bearer key-alpha"}
BETA = {"Authorization": "Bearer key-beta"}
UNAVAILABLE = "unavailable or expired"


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with two API keys mapped to tenants alpha and beta."""
    with make_client(tmp_path_factory.mktemp("tenants"), api_keys=KEYS) as c:
        yield c


def exec_as(client: TestClient, headers: dict[str, str], code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, **fields}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def tag() -> str:
    return uuid.uuid4().hex[:12]


def test_requests_without_a_valid_key_are_refused(tenants):
    """With keys configured, a missing or unknown key gets 401 before anything runs."""
    assert tenants.post("/v1/exec", json={"code": "return 1"}).status_code == 401
    r = tenants.post("/v1/exec", json={"code": "return 1"}, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    assert r.json()["error"]["code"]


def test_other_tenant_cannot_see_or_touch_a_cell(tenants):
    """Another tenant gets 404 for a cell's status, wait and cancel; the owner can still resume it."""
    env = exec_as(tenants, ALPHA, 'text("x"); await yield_control(); return "alpha done";')
    assert env["status"] == "waiting"
    cell = env["cell_id"]
    for method, path in (
        ("get", f"/v1/cells/{cell}"),
        ("post", f"/v1/cells/{cell}/wait"),
        ("post", f"/v1/cells/{cell}/cancel"),
    ):
        kwargs: dict[str, Any] = {"headers": BETA}
        if method == "post":
            kwargs["json"] = {}
        r = getattr(tenants, method)(path, **kwargs)
        assert r.status_code == 404, (path, r.status_code, r.text)
        assert "cell is unavailable or expired" in r.text
    r = tenants.post(f"/v1/cells/{cell}/wait", json={}, headers=ALPHA)
    assert r.status_code == 200 and r.json()["value"] == "alpha done", r.text
    # Even a finished cell is answered like an unknown one for the other tenant.
    assert tenants.get(f"/v1/cells/{cell}", headers=BETA).status_code == 404
    assert tenants.get(f"/v1/cells/{cell}", headers=ALPHA).status_code == 200


def test_same_session_id_is_separate_per_tenant(tenants):
    """Two tenants using the same session_id have separate stores, listings and deletes."""
    sid = "shared-" + tag()
    value(exec_as(tenants, ALPHA, 'await store("k", "alpha"); return null;', session_id=sid))
    assert value(exec_as(tenants, BETA, 'return (await load("k")) === undefined;', session_id=sid)) is True
    value(exec_as(tenants, BETA, 'await store("k", "beta-value"); return null;', session_id=sid))
    assert value(exec_as(tenants, ALPHA, 'return await load("k");', session_id=sid)) == "alpha"
    listing_a = tenants.get(f"/v1/sessions/{sid}/store", headers=ALPHA).json()
    listing_b = tenants.get(f"/v1/sessions/{sid}/store", headers=BETA).json()
    assert listing_a["keys"] == [{"key": "k", "bytes": len('"alpha"')}]
    assert listing_b["keys"] == [{"key": "k", "bytes": len('"beta-value"')}]
    assert tenants.delete(f"/v1/sessions/{sid}", headers=BETA).status_code == 200
    assert value(exec_as(tenants, ALPHA, 'return await load("k");', session_id=sid)) == "alpha"
    assert tenants.get(f"/v1/sessions/{sid}/store", headers=BETA).json()["keys"] == []


def test_saved_results_are_scoped_to_the_tenant(tenants):
    """A reference saved by one tenant is unavailable to another with the same session and run ids."""
    ids = {"session_id": "s-" + tag(), "run_id": "r-" + tag()}
    ref = value(exec_as(tenants, ALPHA, "return await results.save({secret: 1});", **ids))
    load = f"try {{ return await results.load({json.dumps(ref['id'])}); }} catch (e) {{ return 'ERR ' + e.message; }}"
    answer = value(exec_as(tenants, BETA, load, **ids))
    assert isinstance(answer, str) and UNAVAILABLE in answer, answer
    # Ending "the same" run as the other tenant expires nothing of alpha's.
    r = tenants.delete(f"/v1/sessions/{ids['session_id']}/runs/{ids['run_id']}", headers=BETA)
    assert r.status_code == 200 and r.json()["expired_results"] == 0, r.text
    assert value(exec_as(tenants, ALPHA, load, **ids)) == {"secret": 1}


def test_automatic_reference_is_not_loadable_by_another_tenant(tenants):
    """A reference made for an oversized final array loads for its tenant's next cell, not for another tenant."""
    ids = {"session_id": "s-" + tag(), "run_id": "r-" + tag()}
    marker = value(exec_as(tenants, ALPHA, "return Array.from({length: 20000}, (_, i) => ({i}));", **ids))
    assert isinstance(marker, dict) and "reference" in marker, marker
    ref_id = json.dumps(marker["reference"]["id"])
    load = f"try {{ return (await results.load({ref_id})).length; }} catch (e) {{ return 'ERR ' + e.message; }}"
    assert value(exec_as(tenants, ALPHA, load, **ids)) == 20000
    answer = value(exec_as(tenants, BETA, load, **ids))
    assert isinstance(answer, str) and UNAVAILABLE in answer, answer


def test_per_tenant_concurrency_cap_answers_429(tmp_path):
    """With tenant_max_concurrency=1 a second concurrent exec of the same tenant gets 429 + Retry-After."""
    with make_client(tmp_path, api_keys=KEYS, tenant_max_concurrency=1) as client:
        slow = "await echo({x: 1, delay: 1.5}); return 'slow done';"
        first: dict[str, Any] = {}

        def run_slow() -> None:
            r = client.post("/v1/exec", json={"code": slow, "timeout_ms": 5000}, headers=ALPHA)
            first["status"], first["body"] = r.status_code, r.json()

        thread = threading.Thread(target=run_slow)
        thread.start()
        try:
            # Until the slow exec has started, a quick exec may still pass; while it runs, none may.
            r = None
            while thread.is_alive():
                time.sleep(0.1)
                r = client.post("/v1/exec", json={"code": "return 2"}, headers=ALPHA)
                if r.status_code != 200:
                    break
            assert r is not None, "the slow exec finished before any overlap"
            assert r.status_code == 429, r.text
            assert r.headers.get("Retry-After", "").isdigit(), r.headers
            assert r.json()["error"]["code"]
            # ...while another tenant is not affected.
            other = client.post("/v1/exec", json={"code": "return 3"}, headers=BETA)
            assert other.status_code == 200 and other.json()["value"] == 3, other.text
        finally:
            thread.join(timeout=10)
        assert first["status"] == 200 and first["body"]["value"] == "slow done", first
        # Once the slow cell finished the tenant may run again.
        again = client.post("/v1/exec", json={"code": "return 4"}, headers=ALPHA)
        assert again.status_code == 200 and again.json()["value"] == 4


def test_no_keys_refuses_a_non_loopback_bind(tmp_path):
    """Without API keys, `codemode serve --host <non-loopback>` refuses to start and says how to fix it."""
    # A TEST-NET address: even a broken check could not actually listen on a public interface.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env["CODEMODE_DATA_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve", "--host", "192.0.2.1", "--port", str(free_port())],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0
    assert "192.0.2.1" in proc.stderr and "API keys" in proc.stderr, proc.stderr
