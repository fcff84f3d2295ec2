"""Error mapping from status and error body, timeouts, and the accepted forms of client_tools and approvals."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from codemode_client import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    Client,
    CodemodeError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PendingCall,
    PermissionDeniedError,
    ProtocolError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    ServiceUnavailableError,
)
from codemode_client.errors import api_error
from codemode_client.tools import NO_APPROVER_REASON, approval, no_approver, tool_result, tool_set
from codemode_client.wire import exec_body, file_path, segment, wait_body

from tests.client.sse_server import HANG, sse_server


def body(code: str, **extra: object) -> bytes:
    import json

    return json.dumps(
        {"error": {"code": code, "message": f"{code} happened", "error_type": "recoverable", **extra}}
    ).encode()


@pytest.mark.parametrize(
    "status, cls, code",
    [
        (400, BadRequestError, "invalid_request"),
        (401, AuthenticationError, "unauthorized"),
        (403, PermissionDeniedError, "forbidden"),
        (404, NotFoundError, "cell_not_found"),
        (405, BadRequestError, "invalid_request"),
        (409, ConflictError, "wait_in_progress"),
        (413, PayloadTooLargeError, "body_too_large"),
        (422, BadRequestError, "invalid_request"),
        (429, RateLimitError, "too_many_requests"),
        (500, ServerError, "service_error"),
        (503, ServiceUnavailableError, "store_unavailable"),
    ],
)
def test_status_picks_the_class_and_the_body_gives_the_code(status, cls, code):
    """Each status maps to its class; code, message and status come from the answer."""
    err = api_error(status, {}, body(code))
    assert type(err) is cls and isinstance(err, ApiError) and isinstance(err, CodemodeError)
    assert (err.status, err.code, err.message) == (status, code, f"{code} happened")


def test_error_body_details_and_retry_after():
    """need_param, error_type, non_retriable and a numeric Retry-After are carried; the text names them."""
    err = api_error(429, {"retry-after": "3"}, body("too_many_requests", need_param="x", non_retriable=True))
    assert (err.retry_after, err.need_param, err.error_type, err.non_retriable) == (3.0, "x", "recoverable", True)
    assert str(err) == "HTTP 429 too_many_requests: too_many_requests happened (need_param: x)"
    assert api_error(503, {"retry-after": "soon"}, body("overloaded")).retry_after is None


def test_an_answer_without_the_error_body_keeps_the_class_code_and_shows_the_text():
    """A proxy's HTML 502 is a ServerError with the class's code and the start of what came back."""
    err = api_error(502, {}, b"<html>Bad Gateway</html>")
    assert type(err) is ServerError and err.code == "service_error" and "Bad Gateway" in err.message
    assert api_error(418, {}, b"{}").code == "invalid_request"


def test_no_answer_in_time_raises_request_timeout():
    """A server that never answers: RequestTimeoutError (a TransportError) after the client's timeout."""
    with sse_server(lambda n, h: [HANG]) as (base, _), Client(base, timeout=0.3) as client:
        with pytest.raises(RequestTimeoutError, match="no answer in time"):
            client.status("cell_1")


def test_a_200_that_is_not_json_raises_protocol_error():
    """HTTP 200 with a body that is not JSON is a ProtocolError, not a crash in json.loads."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        return [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"]

    with sse_server(script) as (base, _), Client(base) as client, pytest.raises(ProtocolError, match="not JSON"):
        client.catalog()


# ---- requests -------------------------------------------------------------------------------------


def test_exec_body_sends_only_what_was_given():
    """Fields left at None are not sent; booleans and lists are; unknown keywords are a TypeError."""
    assert exec_body("return 1") == {"code": "return 1"}
    full = exec_body(
        "x",
        title="t",
        timeout_ms=100,
        headless=False,
        background=True,
        require_approval=("a",),
        extra={"future_field": 1},
    )
    assert full == {
        "code": "x",
        "title": "t",
        "timeout_ms": 100,
        "headless": False,
        "background": True,
        "require_approval": ["a"],
        "future_field": 1,
    }
    with pytest.raises(TypeError):
        exec_body("x", timeout=5)  # type: ignore[call-arg]


def test_wait_body_leaves_out_empty_answers():
    """A wait without answers sends {} (a server without approvals accepts it)."""
    assert wait_body(tool_results=[], approvals=[]) == {}
    assert wait_body(timeout_ms=5, approvals=[{"id": "req_1", "approve": True}], session_id="s") == {
        "timeout_ms": 5,
        "approvals": [{"id": "req_1", "approve": True}],
        "session_id": "s",
    }


def test_path_segments_are_encoded_and_never_collapse():
    """Slashes, spaces and dot segments are encoded so a URL library cannot route the request elsewhere."""
    assert segment("cell_1", "cell_id") == "cell_1"
    assert segment("a/b c", "cell_id") == "a%2Fb%20c"
    assert segment("..", "cell_id") == "%2E%2E" and segment(".", "cell_id") == "%2E"
    assert file_path("tools/../x y.d.ts") == "tools/%2E%2E/x%20y.d.ts"
    with pytest.raises(ValueError, match="cell_id must be a non-empty string"):
        segment("", "cell_id")


# ---- client tools and approvals ----------------------------------------------------------------


def documented(params):
    """Looks things up.

    Second paragraph."""
    return params


def test_mapping_form_declares_an_open_object_schema_and_the_docstring():
    """{name: callable}: input_schema {"type": "object"}, description from the docstring (cleaned)."""
    tools = tool_set({"lookup": documented, "bare": lambda p: p, "partial": functools.partial(documented)})
    assert tools.declarations == [
        {"name": "lookup", "input_schema": {"type": "object"}, "description": "Looks things up.\n\nSecond paragraph."},
        {"name": "bare", "input_schema": {"type": "object"}},
        {"name": "partial", "input_schema": {"type": "object"}, "description": "Looks things up.\n\nSecond paragraph."},
    ]
    assert list(tools.handlers) == ["lookup", "bare", "partial"] and tools.handlers["lookup"] is documented


def test_list_forms_keep_the_spec_and_strip_the_handler():
    """(spec, fn) pairs and spec dicts with 'handler'; a spec's own description wins over the docstring;
    a spec without handler is declared only."""
    tools = tool_set(
        [({"name": "a", "description": "own"}, documented), {"name": "b", "handler": documented}, {"name": "c"}]
    )
    assert tools.declarations == [
        {"name": "a", "description": "own"},
        {"name": "b", "description": "Looks things up.\n\nSecond paragraph."},
        {"name": "c"},
    ]
    assert set(tools.handlers) == {"a", "b"}


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ({"x": 3}, TypeError, "not callable"),
        ([{"name": "x"}, {"name": "x"}], ValueError, "declared twice"),
        ([{"description": "no name"}], ValueError, "non-empty string 'name'"),
        (["lookup"], TypeError, "expected a spec dict"),
        ("lookup", TypeError, "client_tools takes"),
        ([({"name": "x"}, "not a function")], TypeError, "handler is not callable"),
    ],
)
def test_malformed_client_tools_are_refused_before_anything_is_sent(bad, error, match):
    """Each malformed form raises TypeError or ValueError naming the problem."""
    with pytest.raises(error, match=match):
        tool_set(bad)


CALL = PendingCall("req_3", "approval", "quote_shipping", {"origin": "DE"}, "needs a human")


def test_approver_answers_become_approvals():
    """True, False and (bool, reason) become {id, approve, reason?}; anything else is a TypeError."""
    assert approval(CALL, True) == {"id": "req_3", "approve": True}
    assert approval(CALL, (False, "too expensive")) == {"id": "req_3", "approve": False, "reason": "too expensive"}
    assert no_approver(CALL) == {"id": "req_3", "approve": False, "reason": NO_APPROVER_REASON}
    for wrong in ("yes", 1, (True, 5), None):
        with pytest.raises(TypeError, match="must return a bool"):
            approval(CALL, wrong)


def test_tool_results_from_values_and_exceptions():
    """A value becomes ok: true; an exception ok: false with its type and message; NaN is not JSON."""
    call = PendingCall("req_1", "tool", "t", {})
    assert tool_result(call, value=[1]) == {"id": "req_1", "ok": True, "value": [1]}
    assert tool_result(call, error=KeyError("k")) == {
        "id": "req_1",
        "ok": False,
        "error": {"message": "KeyError: 'k'", "name": "KeyError"},
    }
    assert tool_result(call, value=float("nan"))["ok"] is False


def test_handlers_are_found_by_the_declared_name_not_the_callable_name():
    """A pending call's ``name`` (as declared) picks the handler; its callable name does not, nor does a
    call without a name (host work, or a service that does not send one)."""
    tools = tool_set({"get-x": lambda p: "x", "get_x": lambda p: "underscore"})

    def found(**entry: Any) -> Any:
        fn = tools.handler(PendingCall.parse({"id": "req_1", "method": "tool", **entry}))
        return fn({}) if fn else None

    assert found(tool="get_x", name="get-x") == "x"
    assert found(tool="get_x_1a2b3c4d", name="get_x") == "underscore"
    assert found(tool="get_x") is None and found(tool="other", name="other") is None


def test_a_base_url_without_scheme_is_refused_at_once():
    """'localhost:8000' is a ValueError naming the expected form, before any request."""
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        Client("localhost:8000")
