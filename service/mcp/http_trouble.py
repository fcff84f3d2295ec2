"""Judging an MCP HTTP request that got no normal answer (no SDK here: plain bytes and the trouble report).

A 404 to a request carrying our session, or a 400 whose text names the session, means the server
forgot the session (it restarted): the request was refused unprocessed.  A request that could not
connect never left.  Both end the connection (the next request opens a new session) and may be
resent; a request whose answer broke off may have run.  For a POST the verdict carries the JSON-RPC
error the SDK gets instead, with a report under ``TROUBLE_KEY`` that names the connection's nonce, so
a server cannot forge one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bridge.json_types import JsonObject, JsonValue
from service.outbound_http import McpHttpTrouble

#: Characters of a server's own error text kept in an error message (remote text, bounded).
SERVER_WORDS_CHARS = 512
#: Where our HTTP trouble reports ride in a JSON-RPC error's `data` (with the connection's nonce).
TROUBLE_KEY = "codemodeHttpTrouble"
#: JSON-RPC's "internal error", for an answer that carried no code of the server's own.
_INTERNAL_ERROR = -32603


@dataclass(frozen=True)
class TroubleVerdict:
    """What one troubled request means for its connection, and what the SDK is answered instead."""

    dead_because: str | None  # why the connection is over (None: it lives on)
    answer: bytes | None  # the JSON-RPC error body for a POST; None keeps the original answer


def judge(trouble: McpHttpTrouble, nonce: str) -> TroubleVerdict:
    """The verdict on one troubled request of the connection whose reports carry ``nonce``."""
    words = server_words(trouble)
    stale = trouble.sent_session and (trouble.status == 404 or (trouble.status == 400 and "session" in words.lower()))
    not_sent = trouble.failure == "not_sent"
    dead_because = None
    if stale:
        dead_because = f"the server no longer knows our session ({clip(words, 200)})"
    elif trouble.failure is not None and trouble.error != "PoolTimeout":  # a full pool is ours, not the server's
        dead_because = f"a request failed ({words})"
    if trouble.method != "POST":
        return TroubleVerdict(dead_because, None)  # the SDK retries its event stream, then gives up
    code = rpc_error(trouble.body).get("code") if "json" in trouble.content_type else None
    report: JsonObject = {"nonce": nonce, "resendable": stale or not_sent, "status": trouble.status}
    error: JsonObject = {
        "code": code if type(code) is int else _INTERNAL_ERROR,  # the server's own code where it gave one
        "message": words,
        "data": {TROUBLE_KEY: report},
    }
    return TroubleVerdict(dead_because, json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode())


def our_report(data: object, nonce: str) -> JsonObject | None:
    """The trouble report in a JSON-RPC error's ``data`` if this connection (``nonce``) made it."""
    found = data.get(TROUBLE_KEY) if isinstance(data, dict) else None
    return found if isinstance(found, dict) and found.get("nonce") == nonce else None


def clip(text: str, limit: int) -> str:
    """Remote text on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[:limit] + "\u2026"


def rpc_error(body: bytes) -> dict[str, JsonValue]:
    """The ``error`` object of a JSON-RPC error body (or a bare ``{code?, message}``), else ``{}``."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    found = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    return found if isinstance(found, dict) else {}


def server_words(trouble: McpHttpTrouble) -> str:
    """What went wrong in the server's own words where it gave any: ``HTTP 400: Bad Request: …``."""
    if trouble.status is None:
        return f"{'never sent' if trouble.failure == 'not_sent' else 'no answer'}: {trouble.error}"
    text = ""
    if "json" in trouble.content_type:
        message = rpc_error(trouble.body).get("message")
        text = message if isinstance(message, str) else ""
    if not text and trouble.content_type.startswith(("text/", "application/json")):
        text = trouble.body.decode("utf-8", "replace")
    text = clip(text, SERVER_WORDS_CHARS)
    return f"HTTP {trouble.status}" + (f": {text}" if text else "")
