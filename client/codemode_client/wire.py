"""The API's requests as data: paths, bodies and time allowances, the same for both clients."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import quote

from .tools import ClientTools, tool_set

#: The cell languages a request may name: "typescript" is JavaScript whose types the service strips.
CellLanguage = Literal["javascript", "typescript", "python"]

#: Extra seconds a request may take beyond the ``timeout_ms`` the service itself keeps to (queueing,
#: worker start, the answer's bytes).
SERVICE_SLACK_S = 30.0


def segment(value: str, what: str) -> str:
    """One path segment: percent-encoded, never empty, never a dot segment a URL library would collapse."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, not {value!r:.60}")
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def file_path(path: str) -> str:
    """An API file path (``tools/echo.d.ts``): each segment encoded, slashes kept."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"an API file path must be a non-empty string, not {path!r:.60}")
    return "/".join(quote(s, safe="") if s not in (".", "..") else s.replace(".", "%2E") for s in path.split("/"))


def cell_path(cell_id: str, action: str = "") -> str:
    return f"/v1/cells/{segment(cell_id, 'cell_id')}" + (f"/{action}" if action else "")


def exec_body(
    code: str,
    *,
    language: CellLanguage | None = None,
    title: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
    timeout_ms: int | None = None,
    memory_limit_bytes: int | None = None,
    max_output_bytes: int | None = None,
    client_tools: ClientTools | None = None,
    restart_safe: bool | None = None,
    headless: bool | None = None,
    background: bool | None = None,
    call_log: bool | None = None,
    require_approval: Sequence[str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``POST /v1/exec``'s body; fields left at None are not sent, so the service's defaults apply."""
    body: dict[str, Any] = {"code": code}
    fields = {
        "language": language,
        "title": title,
        "session_id": session_id,
        "run_id": run_id,
        "timeout_ms": timeout_ms,
        "memory_limit_bytes": memory_limit_bytes,
        "max_output_bytes": max_output_bytes,
        "restart_safe": restart_safe,
        "headless": headless,
        "background": background,
        "call_log": call_log,
        "require_approval": list(require_approval) if require_approval is not None else None,
    }
    body.update({k: v for k, v in fields.items() if v is not None})
    declarations = tool_set(client_tools).declarations
    if declarations:
        body["client_tools"] = declarations
    body.update(extra or {})
    return body


def wait_body(
    *,
    timeout_ms: int | None = None,
    tool_results: Sequence[Mapping[str, Any]] | None = None,
    approvals: Sequence[Mapping[str, Any]] | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """``POST /v1/cells/{id}/wait``'s body (empty lists are not sent: a service without approvals accepts it)."""
    body: dict[str, Any] = {}
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    if tool_results:
        body["tool_results"] = [dict(r) for r in tool_results]
    if approvals:
        body["approvals"] = [dict(a) for a in approvals]
    if session_id is not None:
        body["session_id"] = session_id
    return body


def allowance(default_s: float | None, timeout_ms: int | None) -> float | None:
    """How long to wait for an exec or wait answer: the client's timeout, or longer for a long ``timeout_ms``."""
    if default_s is None:
        return None
    if timeout_ms is None:
        return default_s
    return max(default_s, timeout_ms / 1000 + SERVICE_SLACK_S)


def last_event_header(last_event_id: str | int | None) -> dict[str, str]:
    return {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
