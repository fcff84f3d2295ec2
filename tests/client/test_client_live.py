"""Client and AsyncClient against a real `codemode serve`: every call, run() with client tools, errors."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading

import pytest
from codemode_client import (
    AsyncClient,
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    TransportError,
)

from tests.client.conftest import API_KEY
from tests.support.live_server import free_port
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow


def test_exec_completes_with_typed_output(client: Client):
    """exec answers a completed envelope: value, text and json output entries, telemetry, raw dict."""
    env = client.exec('text("hi"); json({a: 1}); return 40 + 2', title="client test")
    assert env.status == "completed" and env.is_final and env.value == 42
    assert [(e.kind, e.text, e.value) for e in env.output] == [("text", "hi", None), ("json", None, {"a": 1})]
    assert env.text == "hi" and env.telemetry["legs"] == 1 and env.raw["value"] == 42


def test_exec_and_run_take_the_cell_language(client: Client):
    """`language="python"` runs a Python cell (its last expression is the value), through exec and run alike."""
    env = client.exec('text("hi")\n40 + 2', language="python")
    assert env.status == "completed" and env.value == 42 and env.text == "hi"
    env = client.run("x = [n * n for n in range(4)]\nsum(x)", language="python")
    assert env.status == "completed" and env.value == 14
    # The default stays JavaScript: the same source is not JavaScript.
    assert client.exec("sum(x)").status == "failed"


def test_guest_failure_is_an_envelope_not_an_exception(client: Client):
    """A guest error comes back as a failed envelope with its code and phase."""
    env = client.exec("missingFn()")
    assert (env.status, env.code, env.failure_phase) == ("failed", "uncaught_error", "guest")
    assert env.error is not None and env.error.startswith("ReferenceError: missingFn is not defined")


def test_parked_cell_status_wait_and_cancel(client: Client):
    """A cell parked on a timer: status shows it waiting, wait resumes it, cancel ends another with aborted."""
    # The leg's budget (1 s, room for a slow start on a loaded machine) ends well before the 3 s timer.
    env = client.exec(
        'text("before"); await new Promise(r => setTimeout(r, 3000)); text("after"); return 1', timeout_ms=1000
    )
    assert env.status == "waiting" and [e.text for e in env.output] == ["before"]
    assert client.status(env.cell_id).status == "waiting"
    done = client.wait(env.cell_id, timeout_ms=30000)
    assert done.status == "completed" and done.value == 1 and [e.text for e in done.output] == ["after"]

    parked = client.exec("await new Promise(r => setTimeout(r, 60000))", timeout_ms=1000)
    cancelled = client.cancel(parked.cell_id)
    assert cancelled.status == "failed" and cancelled.code == "aborted"


def test_catalog_and_api_files(client: Client):
    """catalog lists the plugin's tools and the quick index; api_files lists and reads declarations."""
    catalog = client.catalog()
    assert "quote_shipping" in {t["callableName"] for t in catalog["tools"]}
    assert "quote_shipping" in catalog["quick_index"]
    files = client.api_files(prefix="tools/")
    assert {"path": "tools/quote_shipping.d.ts"}.items() <= next(
        f for f in files["files"] if f["path"] == "tools/quote_shipping.d.ts"
    ).items()
    assert all(f["path"].startswith("tools/") for f in files["files"])
    read = client.api_file("tools/quote_shipping.d.ts")
    assert read["path"] == "tools/quote_shipping.d.ts" and "quote_shipping" in read["content"]


def test_unknown_cell_raises_not_found_with_the_service_code(client: Client):
    """wait, status and cancel of an unknown cell raise NotFoundError: status 404, code cell_not_found."""
    for call in (client.wait, client.status, client.cancel):
        with pytest.raises(NotFoundError) as caught:
            call("cell_00000000-0000-0000-0000-000000000000")
        assert (caught.value.status, caught.value.code) == (404, "cell_not_found")
        assert "unavailable or expired" in caught.value.message


def test_bad_input_raises_bad_request_naming_the_field(client: Client):
    """A timeout_ms out of range is a 422 whose need_param is timeout_ms; a blank code names code."""
    with pytest.raises(BadRequestError) as caught:
        client.exec("return 1", timeout_ms=5)
    assert (caught.value.status, caught.value.code, caught.value.need_param) == (422, "invalid_request", "timeout_ms")
    with pytest.raises(BadRequestError) as blank:
        client.exec("   ")
    assert blank.value.need_param == "code"


def test_api_file_errors_and_dot_segments_stay_in_the_path(client: Client):
    """An unknown file is 404 not_found; a '..' segment reaches the service (422 on path), not another endpoint."""
    with pytest.raises(NotFoundError) as unknown:
        client.api_file("tools/nope.d.ts")
    assert unknown.value.code == "not_found" and "Unknown API file" in unknown.value.message
    with pytest.raises(BadRequestError) as dots:
        client.api_file("tools/../results.d.ts")
    assert dots.value.need_param == "path"
    with pytest.raises(NotFoundError) as cell:
        client.status("..")
    assert cell.value.code in ("cell_not_found", "not_found")


def test_wrong_api_key_raises_authentication_error(base_url: str):
    """An unknown key is 401 with code unauthorized."""
    with Client(base_url, "ck_wrong") as bad, pytest.raises(AuthenticationError) as caught:
        bad.exec("return 1")
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")


def test_second_concurrent_wait_raises_conflict(client: Client, base_url: str):
    """While one wait runs, another on the same cell is 409 wait_in_progress."""
    env = client.exec("await new Promise(r => setTimeout(r, 3000)); return 1", timeout_ms=100)
    first: dict[str, object] = {}
    waiter = threading.Thread(target=lambda: first.update(env=client.wait(env.cell_id, timeout_ms=10000)))
    waiter.start()
    with Client(base_url, API_KEY) as other:

        def conflict() -> bool:
            try:
                other.wait(env.cell_id, timeout_ms=100)
            except ConflictError as exc:
                return exc.code == "wait_in_progress" and exc.status == 409
            return False

        assert poll_until(conflict, "a second wait refused with 409")
    waiter.join(30)
    assert first["env"].value == 1


def test_unreachable_service_raises_transport_error():
    """Nothing listening: TransportError naming the URL, status None."""
    port = free_port()  # bound and released: nothing listens there
    with Client(f"http://127.0.0.1:{port}") as nowhere, pytest.raises(TransportError) as caught:
        nowhere.status("cell_1")
    assert caught.value.status is None and f"127.0.0.1:{port}/v1/cells/cell_1" in str(caught.value)


# ---- run() ---------------------------------------------------------------------------------------

RUN_CODE = """
text("start");
const a = await lookup({q: "x"});
let err = null;
try { await explode({}) } catch (e) { err = e.message }
await yield_control("let the caller breathe");
await new Promise(r => setTimeout(r, 200));
text("end");
const decl = await API.read("tools/lookup.d.ts");
return {a, err, documented: decl.content.includes("Find a thing by its query.")};
"""


def lookup(params):
    """Find a thing by its query."""
    return {"found": params["q"]}


def explode(params):
    raise ValueError("no such thing")


def test_run_answers_client_tools_and_yields(client: Client):
    """run() calls the handler with the input, sends an exception back as a rejection, waits through a yield
    and a parked timer, and returns the final envelope with the whole run's output."""
    env = client.run(RUN_CODE, client_tools={"lookup": lookup, "explode": explode}, timeout_ms=100)
    assert env.status == "completed", env.error
    assert env.value == {"a": {"found": "x"}, "err": "ValueError: no such thing", "documented": True}
    assert [e.text for e in env.output] == ["start", "end"]


def test_run_takes_spec_lists(client: Client):
    """client_tools as (spec, callable) pairs and spec dicts with a handler; the spec's schema and description are declared."""
    spec = {
        "name": "double",
        "description": "Doubles n.",
        "input_schema": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
    }
    tools = [(spec, lambda p: p["n"] * 2), {"name": "triple", "handler": lambda p: p["n"] * 3}]
    env = client.run(
        "let code = null; try { await double({}) } catch (e) { code = e.code } "
        "return [await double({n: 2}), await triple({n: 2}), code, "
        '(await API.read("tools/double.d.ts")).content.includes("Doubles n.")]',
        client_tools=tools,
    )
    assert env.value == [4, 6, "invalid_input", True], env.error


def test_run_reports_a_value_that_is_not_json(client: Client):
    """A handler returning something JSON cannot carry rejects the guest's call, naming the tool."""
    env = client.run("try { await odd({}) } catch (e) { return e.message }", client_tools={"odd": lambda p: {1, 2}})
    assert env.status == "completed" and "odd" in env.value and "not JSON" in env.value


@pytest.mark.anyio
async def test_async_run_with_async_and_plain_handlers(base_url: str):
    """AsyncClient.run awaits async handlers and calls plain ones; calls of one stop run concurrently."""
    both_started = asyncio.Event()
    started = 0

    async def slow(params):
        """Waits until its sibling call has started too."""
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 10)
        return params["i"]

    async with AsyncClient(base_url, API_KEY) as client:
        env = await client.run(
            "const r = await Promise.all([slow({i: 1}), slow({i: 2})]); return [...r, await plain({})]",
            client_tools={"slow": slow, "plain": lambda p: "plain"},
        )
        assert env.status == "completed" and env.value == [1, 2, "plain"], env.error
        status = await client.exec("return 5")
        assert status.value == 5
        with pytest.raises(NotFoundError):
            await client.status("cell_00000000-0000-0000-0000-000000000000")
        assert (await client.catalog())["tools"] and (await client.api_files())["files"]
        assert (await client.api_file("results.d.ts"))["bytes"] > 0


def sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_run_finds_handlers_of_names_that_are_not_plain_identifiers(client: Client):
    """Pending calls carry the declared name beside the callable name: run() finds the handlers of 'get-weather',
    '1st', a reserved word, a reserved prefix and a name spelled like another ('get.weather', hashed)."""
    tools = {
        "get-weather": lambda p: "w",
        "1st": lambda p: "first",
        "text": lambda p: "t",
        "__codemode_x": lambda p: "x",
        "get.weather": lambda p: "w2",
    }
    plugin = json.dumps(sorted(t["callableName"] for t in client.catalog()["tools"]))
    code = (
        f"const plugin = {plugin};"
        "const names = (await API.list('tools/')).files.map(f => f.path.slice(6, -5)).filter(n => !plugin.includes(n));"
        "return Object.fromEntries(await Promise.all(names.map(async n => [n, await globalThis[n]({})])));"
    )
    env = client.run(code, client_tools=tools)
    assert env.status == "completed", env.error
    assert env.value == {
        "get_weather": "w",
        "tool_1st": "first",
        "tool___codemode_x": "x",
        f"text_{sha8('client:text')}": "t",
        f"get_weather_{sha8('client:get.weather')}": "w2",
    }


def test_run_hands_each_legs_envelope_to_on_envelope(client: Client):
    """run()'s on_envelope sees the exec's waiting envelope (the cell id, the pending call) and then the
    final one, in order; the returned envelope is the last it saw."""
    seen = []
    env = client.run(
        "return (await twice({n: 21})).n",
        client_tools={"twice": lambda args: {"n": args["n"] * 2}},
        on_envelope=seen.append,
    )
    assert env.value == 42
    assert [e.status for e in seen] == ["waiting", "completed"]
    assert {e.cell_id for e in seen} == {env.cell_id}
    assert [p.name for p in seen[0].pending_tool_calls] == ["twice"]


def test_exec_asks_for_the_call_log(client: Client):
    """exec(call_log=True) sends the field: the envelope's telemetry lists the cell's tool call."""
    env = client.exec(
        'return (await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})).currency', call_log=True
    )
    assert env.status == "completed", env
    assert [(c["method"], c["target"]) for c in env.telemetry["call_log"]] == [("tool", "quote_shipping")]
