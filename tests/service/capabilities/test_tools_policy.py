"""Tool policy through cells and HTTP: deny, opt-in tools, per-key narrowing, loop guard, call budget."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.settings import ApiKey, ToolSettings
from tests.conftest import make_client, run
from tests.support.tools import CALLS

SHIPPING = "service.demo.shipping"
FULL = {"Authorization": "Bearer full-key"}
NARROW = {"Authorization": "Bearer narrow-key"}
NO_SHIPPING = {"Authorization": "Bearer no-shipping-key"}
KEYS = (
    ApiKey("full-key", "t-full"),
    ApiKey("narrow-key", "t-narrow", {"deny": ["quote_shipping"]}),
    ApiKey("no-shipping-key", "t-noship", {"deny": ["shipping"]}),  # a plugin id
)


@pytest.fixture(scope="module")
def policed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """track_package denied, cancel_shipment (opt-in) allowed by name, three API keys."""
    tools = ToolSettings(plugins=(SHIPPING,), allow=("group:plugins", "cancel_shipment"), deny=("track_package",))
    with make_client(tmp_path_factory.mktemp("policy"), tools=tools, api_keys=KEYS) as c:
        yield c


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Shipping plugin with default policy and a per-cell call budget of 3."""
    with make_client(
        tmp_path_factory.mktemp("budget"), tools=ToolSettings(plugins=(SHIPPING,)), max_calls_per_cell=3, workers=1
    ) as c:
        yield c


def cell(client: TestClient, code: str, headers: dict[str, str] = FULL) -> dict:
    """Run a cell as the given API key; returns the envelope."""
    r = client.post("/v1/exec", json={"code": code}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def visible(client: TestClient, headers: dict[str, str]) -> list[str]:
    """Callable names `catalog.all()` shows to a key."""
    env = cell(client, "return catalog.all().map(h => h.callableName)", headers)
    assert env["status"] == "completed", env
    return env["value"]


def test_denied_tool_has_no_global_and_no_handle(policed):
    """A tool denied in settings has no global, no catalog entry, and search cannot find it."""
    env = cell(
        policed,
        """
        return {type: typeof track_package, inGlobal: "track_package" in globalThis,
                all: catalog.all().some(h => h.callableName === "track_package"),
                exact: (await catalog.search("track_package")).length,
                ranked: (await catalog.search("tracking history parcel carrier", {limit: 50}))
                          .map(h => h.callableName)};
    """,
    )
    assert env["status"] == "completed", env
    v = env["value"]
    assert v["type"] == "undefined" and v["inGlobal"] is False and v["all"] is False
    assert v["exact"] == 0
    assert "track_package" not in v["ranked"]


def test_calling_a_denied_tool_by_guessed_name_fails(policed):
    """Calling the denied tool by name fails with ReferenceError; its declaration file is unknown."""
    env = cell(policed, "return await track_package({tracking_number: 'AB123456'})")
    assert env["status"] == "failed", env
    assert env["error"].startswith("ReferenceError: track_package is not defined")
    env = cell(policed, 'try { await API.read("tools/track_package.d.ts") } catch (e) { return e.message }')
    assert env["value"] == "Unknown API file: tools/track_package.d.ts"
    guessed = cell(policed, 'return [typeof globalThis["shipping.track_package"], typeof shipping]')
    assert guessed["value"] == ["undefined", "undefined"]


def test_denied_tool_is_absent_from_http_catalog_and_api_files(policed):
    """`GET /v1/catalog` and `GET /v1/api/files` do not mention the denied tool."""
    body = policed.get("/v1/catalog", headers=FULL).json()
    assert "track_package" not in [t["callableName"] for t in body["tools"]]
    assert "track_package" not in body["quick_index"]
    files = policed.get("/v1/api/files", headers=FULL).json()["files"]
    assert "tools/track_package.d.ts" not in [f["path"] for f in files]
    assert policed.get("/v1/api/files/tools/track_package.d.ts", headers=FULL).status_code == 404


def test_optional_tool_is_absent_by_default(plain):
    """The opt-in cancel_shipment is not visible without an allow entry naming it."""
    assert "cancel_shipment" not in visible(plain, {})
    env = run(plain, "return typeof cancel_shipment")
    assert env["value"] == "undefined"


def test_optional_tool_allowed_by_name_is_callable(policed):
    """cancel_shipment, allowed by name, is a global and runs (its is_error result rejects, recoverable)."""
    assert "cancel_shipment" in visible(policed, FULL)
    env = cell(
        policed,
        """
        const ok = await cancel_shipment({shipment_id: "SHP-1001"});
        try { await cancel_shipment({shipment_id: "SHP-1002"}); return "resolved"; }
        catch (e) { return [ok, {code: e.code, errorType: e.errorType, details: e.details, message: e.message}]; }
    """,
    )
    assert env["status"] == "completed", env
    ok, refused = env["value"]
    assert ok == {"shipment_id": "SHP-1001", "cancelled": True}
    assert refused["code"] == "tool_error" and refused["errorType"] == "recoverable"
    assert refused["details"]["cancelled"] is False
    assert refused["message"] == "cancel_shipment failed: only undelivered shipments can be cancelled"


def test_api_key_narrowing_removes_a_tool_for_that_key_only(policed):
    """A key with `deny: [quote_shipping]` loses the tool; another key of the same server keeps it."""
    assert "quote_shipping" in visible(policed, FULL)
    narrow = visible(policed, NARROW)
    assert "quote_shipping" not in narrow and "shipments" in narrow
    code = "return [typeof quote_shipping, (await catalog.search('quote_shipping')).length]"
    env = cell(policed, code, NARROW)
    assert env["value"] == ["undefined", 0]
    tools = [t["callableName"] for t in policed.get("/v1/catalog", headers=NARROW).json()["tools"]]
    assert "quote_shipping" not in tools
    r = policed.get("/v1/api/files/tools/quote_shipping.d.ts", headers=NARROW)
    assert r.status_code == 404
    assert policed.get("/v1/api/files/tools/quote_shipping.d.ts", headers=FULL).status_code == 200


def test_api_key_narrowing_by_plugin_id(policed):
    """A key denying the plugin id `shipping` sees none of its tools but keeps the other tools."""
    names = visible(policed, NO_SHIPPING)
    assert names == ["blob", "echo", "fail", "news"]


def test_narrowing_cannot_add_tools(policed):
    """Per-key narrowing never re-enables a tool the server denied."""
    for headers in (FULL, NARROW, NO_SHIPPING):
        assert "track_package" not in visible(policed, headers)


def test_loop_guard_refuses_the_fourth_identical_call(policed):
    """The same tool with the same arguments a 4th time rejects with loop_guard; the tool did not run."""
    start = CALLS.get("echo", 0)
    env = cell(
        policed,
        """
        const out = [];
        for (let i = 0; i < 4; i++) {
          try { out.push((await echo({x: "same"})).echo); } catch (e) { out.push([e.code, e.message]); }
        }
        out.push((await echo({x: "different"})).echo);
        return out;
    """,
    )
    assert env["status"] == "completed", env
    v = env["value"]
    assert v[:3] == ["same", "same", "same"]
    code, message = v[3]
    assert code == "loop_guard"
    assert "echo" in message and "3 times" in message
    assert v[4] == "different"
    assert CALLS.get("echo", 0) - start == 4


def test_loop_guard_counts_per_cell(policed):
    """A new cell starts a fresh loop-guard count."""
    code = "for (let i = 0; i < 3; i++) await echo({x: 'again'}); return 'ok'"
    assert cell(policed, code)["value"] == "ok"
    assert cell(policed, code)["value"] == "ok"


def test_call_budget_refuses_calls_past_max_calls_per_cell(plain):
    """With max_calls_per_cell=3 the 4th call rejects with call_budget_exceeded; earlier ones ran."""
    start = CALLS.get("echo", 0)
    env = run(
        plain,
        """
        const out = [];
        for (let i = 0; i < 5; i++) {
          try { out.push((await echo({x: i})).echo); } catch (e) { out.push(e.code); }
        }
        return out;
    """,
    )
    assert env["status"] == "completed", env
    assert env["value"] == [0, 1, 2, "call_budget_exceeded", "call_budget_exceeded"]
    assert CALLS.get("echo", 0) - start == 3
    assert env["telemetry"]["call_count"] == 3


def test_call_budget_message_says_what_to_do(plain):
    """The budget refusal names the tool and suggests batching or a new cell."""
    env = run(
        plain,
        """
        await list_carriers(); await list_carriers(); await list_carriers();
        try { await shipments({action: "list"}); } catch (e) { return e.message; }
    """,
    )
    assert "shipments" in env["value"] and "budget" in env["value"]
    assert "new cell" in env["value"]
