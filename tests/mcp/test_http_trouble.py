"""The verdict on an MCP HTTP request that got no normal answer (pure: no server, no SDK)."""

from __future__ import annotations

import json

from service.mcp.http_trouble import SERVER_WORDS_CHARS, TROUBLE_KEY, judge, our_report, server_words
from service.outbound_http import McpHttpTrouble

NONCE = "abc123"


def _report(answer: bytes | None) -> dict[str, object]:
    assert answer is not None
    error = json.loads(answer)["error"]
    report = our_report(error["data"], NONCE)
    assert report is not None
    return report


def test_a_forgotten_session_ends_the_connection_and_may_be_resent():
    """A 404 to a request carrying our session: the server restarted, the request was refused unprocessed."""
    verdict = judge(McpHttpTrouble("POST", sent_session=True, status=404), NONCE)
    assert verdict.dead_because is not None and "session" in verdict.dead_because
    assert _report(verdict.answer) == {"nonce": NONCE, "resendable": True, "status": 404}


def test_a_400_naming_the_session_is_a_forgotten_session_but_another_400_is_not():
    body = json.dumps({"error": {"code": -32600, "message": "Bad Request: No valid session ID"}}).encode()
    stale = judge(McpHttpTrouble("POST", True, 400, "application/json", body), NONCE)
    assert stale.dead_because is not None and _report(stale.answer)["resendable"] is True
    other = json.dumps({"error": {"code": -32602, "message": "bad arguments"}}).encode()
    plain = judge(McpHttpTrouble("POST", True, 400, "application/json", other), NONCE)
    assert plain.dead_because is None and _report(plain.answer)["resendable"] is False
    assert json.loads(plain.answer or b"")["error"]["code"] == -32602  # the server's own code is kept


def test_a_request_that_never_left_is_resendable_and_one_whose_answer_broke_is_not():
    never = judge(McpHttpTrouble("POST", True, failure="not_sent", error="ConnectError"), NONCE)
    assert never.dead_because is not None and _report(never.answer) == {
        "nonce": NONCE,
        "resendable": True,
        "status": None,
    }
    broken = judge(McpHttpTrouble("POST", True, failure="broken", error="ReadError"), NONCE)
    assert broken.dead_because is not None and _report(broken.answer)["resendable"] is False


def test_a_full_pool_is_ours_and_leaves_the_connection_alive():
    verdict = judge(McpHttpTrouble("POST", True, failure="not_sent", error="PoolTimeout"), NONCE)
    assert verdict.dead_because is None and _report(verdict.answer)["resendable"] is True


def test_an_event_stream_get_keeps_its_original_answer():
    verdict = judge(McpHttpTrouble("GET", sent_session=True, status=404), NONCE)
    assert verdict.answer is None and verdict.dead_because is not None


def test_a_report_with_another_nonce_is_not_ours():
    """A server cannot forge a resendable report: only this connection's nonce is believed."""
    assert our_report({TROUBLE_KEY: {"nonce": "forged", "resendable": True}}, NONCE) is None
    assert our_report("not an object", NONCE) is None


def test_the_servers_words_are_bounded_and_on_one_line():
    body = ("line one\nline two " + "x" * 10_000).encode()
    words = server_words(McpHttpTrouble("POST", False, 500, "text/plain", body))
    assert words.startswith("HTTP 500: line one line two") and "\n" not in words
    assert len(words) <= len("HTTP 500: ") + SERVER_WORDS_CHARS + 1
