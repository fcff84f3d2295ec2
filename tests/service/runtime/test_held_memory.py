"""Every byte held for a cell is charged and bounded (SPEC §5, the untrusted-input contract): pending request arguments,
finished-cell summaries, and end-of-cell commits that happen only once the result can be sent."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bridge.json_cost import parsed_cost
from service.runtime.envelopes import SUMMARY_TEXT_BYTES
from tests.conftest import make_client, run, wait
from tests.support.polling import poll_until

MiB = 1024 * 1024
INBOX = 10 * MiB  # default allowance: min(memory_limit_bytes 64 MiB, max_snapshot_bytes 10 MiB)
# Two-byte characters: three calls are 6 M UTF-16 units, under the guest's per-burst cap (10 Mi units),
# but 12 MB of UTF-8, so the host's inbox charge (in bytes) admits two and refuses the third.
ARG_CHAR = "é"
ARG_CHARS = 2_000_000
SINK = {"name": "sink", "description": "Takes a payload from the guest."}
BUDGET_ERROR = "RangeError: program-data budget exceeded"


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service of its own, so the held-bytes gauge counts only this module's cells."""
    with make_client(tmp_path_factory.mktemp("held")) as c:
        yield c


def held_bytes(client: TestClient) -> int:
    """The ``codemode_cell_held_bytes`` gauge: argument and reply bytes held for live cells."""
    text = client.get("/metrics").text
    match = re.search(r"^codemode_cell_held_bytes (\S+)$", text, re.MULTILINE)
    assert match is not None, text
    return int(float(match.group(1)))


def compact(value: Any) -> bytes:
    """Compact JSON as the guest and the host write it (UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def args_cost(tool: str, params: dict[str, Any]) -> int:
    """What a running tool request's arguments are charged: their parsed cost, reckoned from the bytes the guest sends."""
    return parsed_cost(compact([tool, params]))


def sink_calls(count: int) -> str:
    return f"""
    const calls = [];
    for (let k = 1; k <= {count}; k++) {{
      calls.push(sink({{k, s: "{ARG_CHAR}".repeat({ARG_CHARS})}}).then(v => "ok " + v, e => e.name + ": " + e.message));
    }}
    return await Promise.all(calls);
    """


@pytest.mark.slow
def test_client_tool_inputs_are_charged_until_answered_and_over_allowance_refused(svc):
    """Pending client-tool inputs count against the inbox (as the encoded input each holds); a call that
    does not fit rejects catchably and the cell goes on; each answer releases its input's bytes."""
    one = len(compact({"k": 1, "s": ARG_CHAR * ARG_CHARS}))
    env = run(svc, sink_calls(3), client_tools=[SINK])
    assert env["status"] == "waiting", env
    assert [p["input"]["k"] for p in env["pending_tool_calls"]] == [1, 2]  # the third was refused
    assert held_bytes(svc) == 2 * one
    first, second = (p["id"] for p in env["pending_tool_calls"])

    env = wait(svc, env["cell_id"], tool_results=[{"id": first, "ok": True, "value": 1}])
    assert env["status"] == "waiting" and [p["id"] for p in env["pending_tool_calls"]] == [second], env
    assert held_bytes(svc) == one

    env = wait(svc, env["cell_id"], tool_results=[{"id": second, "ok": True, "value": 2}])
    assert env["status"] == "completed", env
    assert env["value"][:2] == ["ok 1", "ok 2"]
    assert env["value"][2].startswith(BUDGET_ERROR) and "Pass less data per call" in env["value"][2]
    assert held_bytes(svc) == 0


@pytest.mark.slow
def test_status_and_repeated_waits_stay_within_the_allowance(svc):
    """However often a parked cell is polled, each answer carries at most the allowance of inputs."""
    env = run(svc, sink_calls(4), client_tools=[SINK])
    assert env["status"] == "waiting", env
    cell = env["cell_id"]
    bodies = [svc.get(f"/v1/cells/{cell}").content for _ in range(2)]
    for _ in range(2):
        r = svc.post(f"/v1/cells/{cell}/wait", json={"timeout_ms": 100})
        assert r.status_code == 200 and r.json()["status"] == "waiting", r.text
        bodies.append(r.content)
    assert all(len(body) <= INBOX + 4096 for body in bodies), [len(b) for b in bodies]
    assert svc.post(f"/v1/cells/{cell}/cancel").status_code == 200
    assert held_bytes(svc) == 0


def test_cancel_releases_inputs_and_arguments_of_running_tools(svc):
    """A parked cell holds its pending client input and a running tool's arguments; cancel frees both."""
    payload = "y" * 3_000_000
    code = f"""
    const slow = echo({{x: "y".repeat({len(payload)}), delay: 60}});
    const asked = sink({{s: "z".repeat(1000)}});
    return await Promise.all([slow, asked]);
    """
    env = run(svc, code, client_tools=[SINK], timeout_ms=1000)
    assert env["status"] == "waiting", env
    expected = args_cost("echo", {"x": payload, "delay": 60}) + len(compact({"s": "z" * 1000}))
    assert held_bytes(svc) == expected
    r = svc.post(f"/v1/cells/{env['cell_id']}/cancel")
    assert r.status_code == 200 and r.json()["code"] == "aborted", r.text
    assert held_bytes(svc) == 0


@pytest.mark.slow
def test_expiry_releases_pending_inputs(tmp_path):
    """A parked cell that expires gives its pending client-tool inputs back."""
    now = [0.0]
    with make_client(tmp_path, workers=1, cell_ttl_seconds=60, cells_clock=lambda: now[0]) as client:
        env = run(client, sink_calls(1), client_tools=[SINK])
        assert env["status"] == "waiting", env
        assert held_bytes(client) == len(compact({"k": 1, "s": ARG_CHAR * ARG_CHARS}))
        now[0] += 61  # past cell_ttl_seconds idle
        poll_until(lambda: client.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "failed", "the cell expires")
        assert client.get(f"/v1/cells/{env['cell_id']}").json()["code"] == "aborted"
        assert held_bytes(client) == 0


@pytest.mark.parametrize("char", ["e", "é", "😀"])
def test_finished_summary_keeps_a_bounded_error(svc, char):
    """GET on a finished cell answers the error's first 2 KiB (UTF-8 safe, marked), never the whole."""
    env = run(svc, f'throw new Error("{char}".repeat(5e5))', max_output_bytes=10 * MiB)
    assert env["status"] == "failed" and len(env["error"].encode()) > 500_000  # the answer itself is whole
    r = svc.get(f"/v1/cells/{env['cell_id']}")
    assert r.status_code == 200
    summary = r.json()
    assert set(summary) <= {
        "status",
        "cell_id",
        "error",
        "code",
        "failure_phase",
        "warnings",
        "bridge_dispatch_started",
        "replay_safe",
        "untrusted_content",
        "telemetry",
    }
    assert summary["status"] == "failed" and summary["code"] == env["code"]
    assert summary["error"].startswith("Error: " + char * 10)
    assert summary["error"].endswith("[error truncated]")
    assert len(summary["error"].encode()) <= SUMMARY_TEXT_BYTES
    assert len(r.content) < 4096


@pytest.fixture(scope="module")
def store_svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with make_client(tmp_path_factory.mktemp("held-store")) as c:
        yield c


def stored_keys(client: TestClient, sid: str) -> list[str]:
    r = client.get(f"/v1/sessions/{sid}/store")
    assert r.status_code == 200, r.text
    return [entry["key"] for entry in r.json()["keys"]]


@pytest.mark.parametrize(
    "result",
    ['"\\ud800"', "nested(300)", "{k: ['a\\udfffb']}"],
    ids=["lone-surrogate", "nested-300", "surrogate-in-object"],
)
def test_store_commits_only_with_a_sent_result(store_svc, result):
    """A cell that stores, then returns something hard to encode, answers 200; its write is committed
    exactly when the answer says completed (never on a failed or unsent answer)."""
    sid = "s-" + uuid.uuid4().hex[:12]
    code = f"""
    const nested = n => {{ let v = []; for (let i = 0; i < n; i++) v = [v]; return v; }};
    await store("paid", true);
    return {result};
    """
    r = store_svc.post("/v1/exec", json={"code": code, "session_id": sid})
    assert r.status_code == 200, r.text
    env = r.json()
    assert ("paid" in stored_keys(store_svc, sid)) == (env["status"] == "completed"), env
    if result.startswith("nested"):
        # The bridge cuts values at its nesting cap with a marker, so this one can be sent (and commits).
        assert env["status"] == "completed" and "Nested too deep" in json.dumps(env["value"]), env
    status = store_svc.get(f"/v1/cells/{env['cell_id']}").json()
    assert status["status"] == env["status"]
