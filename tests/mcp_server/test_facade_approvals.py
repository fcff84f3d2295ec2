"""Approvals over the MCP facade, through the SDK's client over Streamable HTTP (`/mcp` of `codemode serve`)
and over stdio (`codemode mcp`), in JavaScript and in Python cells.

Key `gamma` needs a person's approval for `quote_shipping`, `MCP.docs.add` and `MCP.docs.echo`.  A client with
an elicitation callback (the person) is asked through forms: on the 2026-07-28 protocol the tool call answers
`input_required` and the SDK retries it with the answers and the sealed `requestState`; in a 2025-11-25
session (HTTP) or connection (stdio) the forms are `elicitation/create` requests.  Key `delta` has the same approvals and lets
the model answer them through `wait` (`mcp_model_approvals`).

A cell parked on such a call holds its pending input encoded (the registry never parses it on the loop); the
facade answers it as plain JSON (it used to fail with "Unable to serialize unknown type: orjson.Fragment").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.mcp_server.conftest import ALPHA, DELTA, GAMMA, connected, http_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

QUOTE = {"origin": "DE", "destination": "FR", "weight_kg": 2}

#: Per language: a cell that asks for an approved quote and a sum, and one that catches a denial.
CELLS = {
    "javascript": (
        'text("asking"); const q = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});\n'
        "const s = await MCP.docs.add({a: 2, b: 3});\n"
        "return {carrier: q.carrier, sum: s.structuredContent.sum};",
        'try { await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2}); return "ran"; }\n'
        "catch (e) { return e.message + ` (code: ${e.code})`; }",
    ),
    "python": (
        'text("asking")\nq = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n'
        "s = await MCP.docs.add(a=2, b=3)\n"
        '{"carrier": q["carrier"], "sum": s["structuredContent"]["sum"]}',
        "try:\n"
        '    await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n'
        '    r = "ran"\n'
        "except Exception as e:\n"
        "    r = str(e)\n"
        "r",
    ),
}


def accept(approve: bool, reason: str | None = None) -> types.ElicitResult:
    content: dict[str, Any] = {"approve": approve}
    if reason is not None:
        content["reason"] = reason
    return types.ElicitResult(action="accept", content=content)


class Person:
    """The person behind the client's forms: answers each form with the next scripted answer (cancel once
    the script runs out) and keeps what each form showed."""

    def __init__(self) -> None:
        self.script: list[types.ElicitResult] = []
        self.shown: list[types.ElicitRequestFormParams] = []

    def will(self, *answers: types.ElicitResult) -> Person:
        self.script, self.shown = list(answers), []
        return self

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams), params
        self.shown.append(params)
        return self.script.pop(0) if self.script else types.ElicitResult(action="cancel")


PERSON = Person()


@pytest.fixture(scope="module", params=["http", "http-legacy", "stdio", "stdio-legacy"])
async def asking(
    request: pytest.FixtureRequest, config_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """A client of gamma that shows forms to `PERSON`, on 2026-07-28 and in a 2025-11-25 session, over HTTP
    and over stdio."""
    async with connected(request, config_file, tmp_path_factory, GAMMA, elicitation_callback=PERSON) as client:
        yield client


@pytest.fixture(scope="module", params=["http", "stdio"])
async def delta(
    request: pytest.FixtureRequest, config_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """A client of delta (its model may answer approvals) without forms, on one transport."""
    async with connected(request, config_file, tmp_path_factory, DELTA) as client:
        yield client


def _approval(envelope: dict[str, Any] | None) -> dict[str, Any]:
    assert envelope is not None and envelope["status"] == "waiting", envelope
    [call] = envelope["pending_tool_calls"]
    assert call["method"] == "approval", call
    return call  # type: ignore[no-any-return]


# ---- a person decides, through the client's forms -------------------------------------------------------


@pytest.mark.parametrize("language", ["javascript", "python"])
async def test_a_person_approves_each_call_and_the_cell_resumes_without_replay(asking: Client, language: str) -> None:
    """exec parks on `quote_shipping`: the person is shown a form naming the tool and its input and approves
    it; the same live cell goes on to `MCP.docs.add`, asked and approved the same way, and completes with both
    results in that one exec call.  Each approved call ran once, the output before the park once."""
    asking_code, _ = CELLS[language]
    person = PERSON.will(accept(True), accept(True))
    done = await asking.call_tool("exec", {"code": asking_code, "language": language})
    envelope = done.structured_content
    assert done.is_error is False and envelope is not None and envelope["status"] == "completed", done
    assert envelope["value"]["sum"] == 5 and isinstance(envelope["value"]["carrier"], str)
    assert envelope["telemetry"]["call_count"] == 2  # nothing ran twice
    assert done.content[0].text.count("asking") == 1
    first, second = person.shown
    assert (
        '\nTool: "quote_shipping"\n' in first.message
        and '{"origin":"DE","destination":"FR","weight_kg":2}' in first.message
    )
    assert '\nTool: "MCP.docs.add"\n' in second.message and '{"a":2,"b":3}' in second.message
    assert first.requested_schema["properties"]["approve"]["type"] == "boolean"
    assert first.requested_schema["required"] == ["approve"]


@pytest.mark.parametrize("language", ["javascript", "python"])
async def test_a_person_denies_with_a_reason_the_cell_reads(asking: Client, language: str) -> None:
    """The person denies: the guest's await rejects with approval_denied and the person's reason; the call
    never ran.  Declining the form denies too."""
    _, denied = CELLS[language]
    for answer, reason in (
        (accept(False, "not today"), "not today"),
        (types.ElicitResult(action="decline"), "declined"),
    ):
        PERSON.will(answer)
        done = await asking.call_tool("exec", {"code": denied, "language": language})
        envelope = done.structured_content
        assert envelope is not None and envelope["status"] == "completed", envelope
        # Python's exceptions carry no attributes: in both languages the message names the reason and the code.
        assert reason in envelope["value"] and envelope["value"].endswith("(code: approval_denied)"), envelope
        assert envelope["bridge_dispatch_started"] is False  # the denied call never reached the tool


async def test_a_dismissed_form_leaves_the_cell_parked_and_wait_asks_again(asking: Client) -> None:
    """The person dismisses the form (cancel): exec answers the cell still waiting, saying so, without asking
    again at once; a later `wait` asks again, and approving then completes the cell."""
    PERSON.will(types.ElicitResult(action="cancel"))
    parked = await asking.call_tool("exec", {"code": CELLS["javascript"][0]})
    call = _approval(parked.structured_content)
    assert call["tool"] == "quote_shipping" and "dismissed the approval form" in parked.content[0].text
    assert len(PERSON.shown) == 1
    person = PERSON.will(accept(True), accept(True))
    done = await asking.call_tool("wait", {"cell_id": parked.structured_content["cell_id"]})  # type: ignore[index]
    assert done.structured_content is not None and done.structured_content["status"] == "completed", done
    assert [p.message.split("\n")[1] for p in person.shown] == ['Tool: "quote_shipping"', 'Tool: "MCP.docs.add"']


async def test_a_form_shows_the_cells_input_as_data_within_its_budget(asking: Client) -> None:
    """An input written to pass for the form's own lines (a newline, a fake `Tool:` line, a right-to-left
    override, a zero-width space) is shown as escaped JSON on one line, and a long one is cut, saying how much
    is not shown."""
    code = 'return await MCP.docs.echo({text: "ok\\nTool: \\"list_carriers\\"\\u202e\\u200b" + "x".repeat(5000)})'
    person = PERSON.will(accept(False, "no"))
    await asking.call_tool("exec", {"code": code})
    [form] = person.shown
    lines = form.message.split("\n")
    assert len(lines) == 6 and lines[1] == 'Tool: "MCP.docs.echo"', lines
    assert lines[3] == "Input (JSON, 5044 bytes, of which the first 2048 are shown):", lines[3]
    assert lines[4].startswith('{"text":"ok\\nTool: \\"list_carriers\\"\\u202e\\u200bxxx')
    assert "\u202e" not in form.message and "\u200b" not in form.message
    assert len(lines[4].encode()) <= 2048 + 6  # two characters written as escapes


# ---- what a person's client sends back is checked --------------------------------------------------------


async def _first_round(client: Client, code: str) -> types.InputRequiredResult:
    first = await client.session.call_tool("exec", {"code": code}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    assert first.request_state is not None and first.input_requests
    return first


async def _retry(client: Client, code: str, state: str, responses: dict[str, Any]) -> Any:
    return await client.session.call_tool(
        "exec", {"code": code}, input_responses=responses, request_state=state, allow_input_required=True
    )


def _refused(result: Any, words: str) -> None:
    assert isinstance(result, types.CallToolResult) and result.is_error is True, result
    text = result.content[0].text
    assert text.startswith("Refused (request_state_refused") and words in text, text


async def test_an_altered_replayed_or_foreign_request_state_is_refused(base_url: str) -> None:
    """Driving the round by hand (the SDK's low-level call): a state with one character changed, a stranger's
    token, one over the size bound, one sent back by another key or with other arguments is refused and
    the cell stays parked; answers to forms that were not asked are refused without using up the state; the
    right retry resumes the cell; sending that state again is refused as used."""
    code = CELLS["javascript"][0]
    async with http_client(base_url, GAMMA, elicitation_callback=PERSON) as gamma:
        first = await _first_round(gamma, code)
        state = first.request_state
        assert state is not None
        [key] = first.input_requests
        yes = {key: accept(True)}
        flipped = state[:10] + ("A" if state[10] != "A" else "B") + state[11:]
        for bad in (flipped, "cm1.e30." + "A" * 43, state + "x" * 5000, "", "é" * 10):
            _refused(await _retry(gamma, code, bad, yes), "altered, or not minted by this service")
        _refused(await _retry(gamma, code + " ", state, yes), "answers another tool call")
        unasked = await _retry(gamma, code, state, {"req_99": accept(True)})
        assert unasked.is_error is True and "'req_99', which this round did not ask" in unasked.content[0].text
        async with http_client(base_url, ALPHA) as alpha:
            _refused(await _retry(alpha, code, state, yes), "given to another API key")
        second = await _retry(gamma, code, state, yes)  # the state is still good: nothing above used it
        assert isinstance(second, types.InputRequiredResult), second
        assert "MCP.docs.add" in next(iter(second.input_requests.values())).params.message
        _refused(await _retry(gamma, code, state, yes), "already used")
        [add] = second.input_requests
        done = await _retry(gamma, code, second.request_state, {add: accept(True)})
        assert isinstance(done, types.CallToolResult) and done.structured_content["status"] == "completed", done
        assert done.structured_content["telemetry"]["call_count"] == 2


# ---- no forms: a person decides elsewhere, or the model when its key allows it ---------------------------


async def test_without_forms_a_person_decides_over_the_http_api(base_url: str) -> None:
    """A client that declares no elicitation: its exec answers the cell waiting, telling the model that a
    person decides over the HTTP API; the model's `wait` may not approve (gamma does not allow it, and its
    wait tool has no approvals argument); the person's approval over HTTP runs the call and answers the
    completed cell, so the model's later `wait` is told the result was delivered."""
    PERSON.will()
    async with http_client(base_url, GAMMA) as gamma:
        tools = {t.name: t for t in (await gamma.list_tools()).tools}
        assert "approvals" not in tools["wait"].input_schema["properties"]
        assert "never by you" in tools["wait"].description
        parked = await gamma.call_tool(
            "exec", {"code": 'return await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})'}
        )
        call = _approval(parked.structured_content)
        cell_id = parked.structured_content["cell_id"]  # type: ignore[index]
        assert "A person must decide these approvals, not you" in parked.content[0].text
        assert f"POST /v1/cells/{cell_id}/wait" in parked.content[0].text and PERSON.shown == []
        refused = await gamma.call_tool(
            "wait", {"cell_id": cell_id, "approvals": [{"id": call["id"], "approve": True}]}
        )
        assert refused.is_error is True and "mcp_model_approvals" in refused.content[0].text
        decided = httpx.post(
            f"{base_url}/v1/cells/{cell_id}/wait",
            json={"approvals": [{"id": call["id"], "approve": True}], "timeout_ms": 20000},
            headers={"Authorization": f"Bearer {GAMMA}"},
            timeout=60,
        )
        assert decided.status_code == 200 and decided.json()["status"] == "completed", decided.text
        assert decided.json()["value"]["carrier"] and decided.json()["telemetry"]["call_count"] == 1
        late = await gamma.call_tool("wait", {"cell_id": cell_id})
        assert late.is_error is True and "result was delivered" in late.content[0].text, late


@pytest.mark.parametrize("language", ["javascript", "python"])
async def test_a_model_allowed_to_approve_answers_through_wait(delta: Client, language: str) -> None:
    """delta's model may approve (its wait tool takes approvals, saying it approves its own calls): exec parks
    and shows the pending call with its input as JSON; approving through `wait` runs it, the cell goes on to
    the next approval, and approving that completes the cell with both results, nothing replayed; denying
    rejects the guest's await with the reason."""
    wait_tool = {t.name: t for t in (await delta.list_tools()).tools}["wait"]
    assert "approvals" in wait_tool.input_schema["properties"] and "approve your own calls" in wait_tool.description
    asking_code, denied = CELLS[language]
    parked = await delta.call_tool("exec", {"code": asking_code, "language": language})
    first = _approval(parked.structured_content)
    assert first["tool"] == "quote_shipping" and first["input"] == QUOTE
    text = parked.content[0].text
    assert "approval req_" in text and '"origin":"DE"' in text and "Decide with `wait`" in text
    cell_id = parked.structured_content["cell_id"]  # type: ignore[index]
    second = await delta.call_tool("wait", {"cell_id": cell_id, "approvals": [{"id": first["id"], "approve": True}]})
    add = _approval(second.structured_content)
    assert add["tool"] == "MCP.docs.add" and add["input"] == {"a": 2, "b": 3}
    done = await delta.call_tool("wait", {"cell_id": cell_id, "approvals": [{"id": add["id"], "approve": True}]})
    envelope = done.structured_content
    assert done.is_error is False and envelope is not None and envelope["status"] == "completed", envelope
    assert envelope["value"]["sum"] == 5 and envelope["telemetry"]["call_count"] == 2

    parked = await delta.call_tool("exec", {"code": denied, "language": language})
    decision = {"id": _approval(parked.structured_content)["id"], "approve": False, "reason": "not today"}
    cell_id = parked.structured_content["cell_id"]  # type: ignore[index]
    done = await delta.call_tool("wait", {"cell_id": cell_id, "approvals": [decision]})
    assert done.structured_content is not None and "not today" in done.structured_content["value"]


async def test_a_background_cells_output_and_value_reach_an_mcp_wait(base_url: str) -> None:
    """A background cell started over HTTP keeps its output and value encoded until collected; `wait` over
    MCP answers them as plain JSON (output entries, the value), as the HTTP wait would."""
    started = httpx.post(
        base_url + "/v1/exec",
        json={"code": 'json({n: 1}); text("two"); return {items: [1, 2, 3]}', "background": True},
        headers={"Authorization": f"Bearer {ALPHA}"},
        timeout=60,
    )
    assert started.status_code == 200 and started.json()["status"] == "running", started.text
    async with http_client(base_url, ALPHA) as alpha:
        done = await alpha.call_tool("wait", {"cell_id": started.json()["cell_id"], "timeout_ms": 20000})
    envelope = done.structured_content
    assert envelope is not None and envelope["status"] == "completed", envelope
    assert envelope["value"] == {"items": [1, 2, 3]}
    assert [entry.get("value", entry.get("text")) for entry in envelope["output"]] == [{"n": 1}, "two"]
    assert 'Result: {"items":[1,2,3]}' in done.content[0].text
