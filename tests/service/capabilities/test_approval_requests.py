"""The approval seam of one cell's host requests (HostRequests), with a real dispatcher and handlers.

The HTTP tests show the behaviour end to end; these pin what they cannot reach cheaply: while the
caller decides, the request holds the input shown for approval, encoded, charged to the cell's inbox
in place of its arguments, and once approved the input's parsed cost again; and ``side_effects_started``
moves only when an approval is granted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge import jsoncodec
from bridge.json_cost import parsed_cost
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall
from service.runtime.host_requests import HostRequests
from service.runtime.spec import CellLimits, CellSpec
from tests.support.polling import apoll_until

pytestmark = pytest.mark.anyio
RAN: list[Any] = []
#: Set by a test to hold approved ``send`` calls running until it is set again.
GATE: list[asyncio.Event] = []


async def guarded(call: HostCall) -> Any:
    """A side-effect handler that asks for approval first, like the tool and MCP handlers do."""
    assert call.ask_approval is not None
    approved, why = await call.ask_approval("send", jsoncodec.dumps(call.take_args()[0]), "send needs approval")
    if not approved:
        raise GuestError(f"denied: {why}", "approval_denied")
    if GATE:
        await GATE[0].wait()
    RAN.append(True)
    return "sent"


def requests(inbox_bytes: int = 1 << 20) -> HostRequests:
    dispatcher = Dispatcher()
    dispatcher.register("send", guarded)
    limits = CellLimits(10000, 1 << 26, 65536, 1 << 20, 500, 16, 1 << 20)
    cell = CellContext("cell_test", CellSpec(code="", tenant="t", limits=limits))
    return HostRequests(dispatcher, inbox_bytes, 16, lambda rid, method, args: HostCall(cell, rid, method, args))


async def test_effects_start_only_when_approved():
    hr = requests()
    hr.dispatch(1, "send", [{"to": "ann"}])
    await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
    assert jsoncodec.loads(jsoncodec.dumps(hr.public())) == [
        {"id": "req_1", "method": "approval", "tool": "send", "input": {"to": "ann"}, "reason": "send needs approval"}
    ]
    assert hr.side_effects_started is False and RAN == []
    assert hr.check_answers([], [{"id": "req_1", "approve": True}]) is None
    hr.settle_answers([], [{"id": "req_1", "approve": True}])
    assert hr.side_effects_started is True and not hr.needs_caller
    await apoll_until(lambda: hr.has_ready, "the approved call settles")
    [(reply, payload)] = hr.take_ready()[0]
    assert reply == {"id": 1, "ok": True} and payload == b'"sent"' and RAN == [True]
    RAN.clear()


async def test_denied_request_settles_with_the_reason_and_no_effects():
    hr = requests()
    hr.dispatch(1, "send", [{"to": "bob"}])
    await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
    hr.settle_answers([], [{"id": "req_1", "approve": False, "reason": "no"}])
    await apoll_until(lambda: hr.has_ready, "the denied call settles")
    [(reply, _)], charged = hr.take_ready()
    assert reply["ok"] is False and reply["error"]["code"] == "approval_denied" and "no" in reply["error"]["message"]
    assert hr.side_effects_started is False and RAN == []
    assert hr.inbox.used == charged  # only the queued reply: the arguments and the shown copy were released


async def test_shown_input_takes_over_the_charge_of_the_arguments():
    """While the caller decides, the inbox holds the shown input's bytes in place of the arguments' parsed
    cost (not both), and the call has not run."""
    hr = requests(inbox_bytes=1000)
    hr.dispatch(1, "send", ["x" * 300])
    # The arguments until the handler asks; where it starts eagerly (Python 3.12+) it has asked already.
    assert hr.inbox.used in (parsed_cost(jsoncodec.dumps(["x" * 300])), len(jsoncodec.dumps("x" * 300)))
    await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
    assert hr.inbox.used == len(jsoncodec.dumps("x" * 300))  # only the copy shown to the caller
    hr.close()
    assert hr.inbox.used == 0 and RAN == []
    args = [[1] * 40]
    tight = requests(inbox_bytes=parsed_cost(jsoncodec.dumps(args)))  # the arguments fit; no copy beside them
    tight.dispatch(1, "send", args)
    await apoll_until(lambda: tight.needs_caller, "the request asks for approval")
    assert tight.inbox.used == len(jsoncodec.dumps([1] * 40))
    tight.close()


async def test_an_approved_call_holds_its_input_parsed_and_is_charged_for_it():
    """Approved, the handler parses the input again to run the call: from then until it settles the request
    is charged the input's parsed cost, and then only its reply."""
    shown = jsoncodec.dumps([[i % 10] for i in range(100)])
    hr = requests()
    GATE.append(asyncio.Event())
    try:
        hr.dispatch(1, "send", [[[i % 10] for i in range(100)]])
        await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
        assert hr.inbox.used == len(shown)
        hr.settle_answers([], [{"id": "req_1", "approve": True}])
        await apoll_until(lambda: hr.inbox.used != len(shown), "the approved handler goes on")
        assert hr.inbox.used == parsed_cost(shown) > 10 * len(shown) and RAN == []
        GATE[0].set()
        await apoll_until(lambda: hr.has_ready, "the approved call settles")
    finally:
        GATE.clear()
    _, charged = hr.take_ready()
    assert hr.inbox.used == charged == len(b'"sent"') and RAN == [True]
    RAN.clear()


async def test_an_approved_input_that_no_longer_fits_is_refused_and_never_runs():
    """If the inbox filled up while the caller decided, the approved input's parsed cost is refused like
    arguments that do not fit: a catchable program_data_budget error, and the call does not run."""
    args = [[[i % 10] for i in range(100)]]
    hr = requests(inbox_bytes=parsed_cost(jsoncodec.dumps(args)))
    hr.dispatch(1, "send", args)
    await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
    # Whatever else took the room meanwhile (a reply, say), but for enough for the error's own reply.
    hr.inbox.charge(hr.inbox.remaining - 1000)
    hr.settle_answers([], [{"id": "req_1", "approve": True}])
    await apoll_until(lambda: hr.has_ready, "the approved call settles")
    [(reply, _)] = hr.take_ready()[0]
    assert reply["ok"] is False and reply["error"]["code"] == "program_data_budget", reply
    assert "held as about" in reply["error"]["message"] and RAN == []


async def test_closing_the_cell_discards_a_pending_approval():
    hr = requests()
    hr.dispatch(1, "send", [{"to": "cat"}])
    await apoll_until(lambda: hr.needs_caller, "the request asks for approval")
    hr.close()
    assert hr.side_effects_started is False and RAN == []
