"""``codemode exec --url``: one cell on a running server, over its HTTP API, with the standard library.

The service's own package holds no HTTP client for its API (the client is its own distribution,
``codemode_client``); a command line that runs one cell needs two requests, ``exec`` and, while the
cell waits on host work, ``wait``: ``urllib`` does.  Blocking is fine: the command does nothing else.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

from bridge import jsoncodec

from .errors import ServerRefused, ServerUnreachable

#: Seconds a request may take beyond the cell's own timeout (queueing, a worker start, the answer).
SLACK_S = 30.0
#: The cell's wall clock when the request names none: the service's default, 10 s, is well under this.
DEFAULT_ALLOWANCE_S = 60.0 + SLACK_S


def run_cell(url: str, api_key: str | None, body: Mapping[str, object]) -> dict[str, object]:
    """Run ``body`` as a cell on the server at ``url`` until it completes, fails, or needs its caller."""
    base = url.rstrip("/")
    timeout_ms = body.get("timeout_ms")
    allowance = timeout_ms / 1000 + SLACK_S if isinstance(timeout_ms, int) else DEFAULT_ALLOWANCE_S
    envelope = _post(f"{base}/v1/exec", api_key, body, allowance)
    while needs_another_leg(envelope):
        envelope = _post(f"{base}/v1/cells/{envelope['cell_id']}/wait", api_key, {}, allowance)
    return envelope


def needs_another_leg(envelope: Mapping[str, object]) -> bool:
    """A cell parked on host work (not on its caller: a client tool, an approval, a yield) runs on."""
    calls = envelope.get("pending_tool_calls")
    return (
        envelope.get("status") == "waiting"
        and envelope.get("reason") != "yield"
        and not any(isinstance(call, dict) and "input" in call for call in (calls if isinstance(calls, list) else []))
    )


def _post(url: str, api_key: str | None, body: Mapping[str, object], timeout_s: float) -> dict[str, object]:
    headers = {"content-type": "application/json", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=jsoncodec.dumps(body), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            data = jsoncodec.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            refusal = jsoncodec.loads(raw)
        except ValueError:
            refusal = {"error": {"code": "http_error", "message": raw.decode("utf-8", "replace")[:500]}}
        raise ServerRefused(exc.code, refusal) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerUnreachable(f"{url}: {reason}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cell_id"), str):
        raise ServerUnreachable(f"{url}: the answer is not a cell envelope (is this a codemode server?)")
    return data
