"""Tools in a cell end to end: bare globals, catalog, handles, describe, telemetry, untrusted text."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.settings import ToolSettings
from service.tools.untrusted import BEGIN_MARKER, END_MARKER
from tests.conftest import make_client, run

SHIPPING = "service.demo.shipping"
# Shipping plugin (cancel_shipment is opt-in, so absent) plus tests/support/tools.py.
VISIBLE = ["blob", "echo", "fail", "list_carriers", "news", "quote_shipping", "shipments", "track_package"]
HANDLE_KEYS = {"callableName", "toolName", "label", "description", "source", "input", "output"}
# A query whose words appear in every visible tool, so only the limit bounds the result.
BROAD = "echo fail blob news shipments carriers track quote"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the shipping plugin and small search limits (default 3, max 5)."""
    with make_client(
        tmp_path_factory.mktemp("shop"),
        tools=ToolSettings(plugins=(SHIPPING,)),
        search_default_limit=3,
        max_search_limit=5,
    ) as c:
        yield c


def value_of(client: TestClient, code: str, **fields) -> object:
    """Run a cell that must complete and return its value."""
    env = run(client, code, **fields)
    assert env["status"] == "completed", env
    return env["value"]


def test_every_allowed_tool_is_a_bare_async_global(shop):
    """Each visible tool is a global function whose call returns a Promise; nothing else leaks in."""
    value = value_of(
        shop,
        f"""
        const names = {VISIBLE!r};
        const out = {{}};
        for (const n of names) {{
          const fn = globalThis[n];
          out[n] = [typeof fn, n === "list_carriers" ? (fn() instanceof Promise) : null];
        }}
        const p = list_carriers(); await p;
        out.legacy = [typeof tools, typeof ALL_TOOLS, typeof cancel_shipment];
        out.all = catalog.all().map(h => h.callableName);
        return out;
    """,
    )
    for name in VISIBLE:
        assert value[name][0] == "function", name
    assert value["list_carriers"][1] is True
    assert value["legacy"] == ["undefined", "undefined", "undefined"]
    assert value["all"] == VISIBLE


def test_global_call_returns_validated_structured_details(shop):
    """`await quote_shipping({...})` resolves to the tool's JSON details, not model text."""
    value = value_of(shop, 'return await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})')
    assert value["quote_id"].startswith("Q-")
    assert value == {
        "quote_id": value["quote_id"],
        "carrier": "parcelpost",
        "service": "standard",
        "price": 15.5,
        "currency": "USD",
        "days": 6,
    }


def test_search_exact_callable_name_comes_first(shop):
    """An exact callable spelling returns that tool (and only name matches, no ranked tail)."""
    value = value_of(shop, 'return (await catalog.search("shipments")).map(h => h.callableName)')
    assert value == ["shipments"]


def test_search_is_case_insensitive_on_names(shop):
    """`catalog.search("TRACK_PACKAGE")` finds track_package."""
    value = value_of(shop, 'return (await catalog.search("TRACK_PACKAGE")).map(h => h.callableName)')
    assert value == ["track_package"]


def test_search_ranks_by_name_and_description(shop):
    """A descriptive query ranks the best tool first (quote_shipping for a parcel price)."""
    value = value_of(shop, 'return (await catalog.search("price parcel in USD")).map(h => h.callableName)')
    assert value[0] == "quote_shipping"
    assert len(value) <= 3


def test_search_without_match_returns_empty_and_calls_nothing(shop):
    """A missing tool search returns `[]`, counts one search and makes no tool call."""
    env = run(shop, 'const r = await catalog.search("zebra crossing"); return [r.length, Object.isFrozen(r)]')
    assert env["status"] == "completed", env
    assert env["value"] == [0, True]
    assert env["telemetry"]["search_count"] == 1
    assert env["telemetry"]["call_count"] == 0


def test_search_limit_is_clamped(shop):
    """Omitted limit -> search_default_limit (3); oversized -> max_search_limit (5); small limits kept."""
    value = value_of(
        shop,
        f"""
        const q = {BROAD!r};
        return [(await catalog.search(q)).length, (await catalog.search(q, {{limit: 100}})).length,
                (await catalog.search(q, {{limit: 2}})).length,
                (await catalog.search(q, {{limit: 1}})).length];
    """,
    )
    assert value == [3, 5, 2, 1]


def test_search_results_are_frozen_arrays_of_callable_handles(shop):
    """Search results are frozen, their handles are frozen functions that call the tool."""
    value = value_of(
        shop,
        """
        const r = await catalog.search("list_carriers");
        let pushed = "no error";
        try { r.push(1); } catch (e) { pushed = e.name; }
        const h = r[0];
        return {frozen: Object.isFrozen(r), handleFrozen: Object.isFrozen(h), kind: typeof h,
                pushed, result: await h()};
    """,
    )
    assert value["frozen"] is True and value["handleFrozen"] is True
    assert value["kind"] == "function"
    assert value["pushed"] == "TypeError"
    assert [c["id"] for c in value["result"]] == ["parcelpost", "swiftfreight", "slowboat"]


def test_catalog_all_is_synchronous_frozen_and_callable(shop):
    """`catalog.all()` returns (not a Promise) a frozen array whose handles call their tools."""
    value = value_of(
        shop,
        """
        const all = catalog.all();
        const h = all.find(x => x.callableName === "shipments");
        return {promise: all instanceof Promise, frozen: Object.isFrozen(all), n: all.length,
                list: await h({action: "list"})};
    """,
    )
    assert value == {
        "promise": False,
        "frozen": True,
        "n": len(VISIBLE),
        "list": {"shipments": ["SHP-1001", "SHP-1002", "SHP-1003"]},
    }


def test_handles_serialise_to_safe_metadata(shop):
    """Returned handles become metadata: known keys only, no nulls, no catalog or plugin ids."""
    value = value_of(
        shop,
        """
        const found = await catalog.search("quote_shipping");
        return {all: catalog.all(), nested: {found}, text: JSON.stringify(found[0])};
    """,
    )
    assert [h["callableName"] for h in value["all"]] == VISIBLE
    for handle in value["all"] + value["nested"]["found"]:
        assert set(handle) <= HANDLE_KEYS, handle
        assert None not in handle.values(), handle
        assert handle["source"] == "plugin"
        flat = repr(handle)
        assert "shipping." not in flat and "plugin.echo" not in flat and "plugin_id" not in flat, flat
    quote = value["nested"]["found"][0]
    assert quote["toolName"] == "quote_shipping" and quote["label"] == "Quote shipping"
    assert "weight_kg: number" in quote["input"] and 'currency: "USD"' in quote["output"]
    # Untyped outputs get no `output` hint at all (never null).
    echo = next(h for h in value["all"] if h["callableName"] == "echo")
    assert "output" not in echo
    # JSON.stringify(handle) goes through toJSON: the same metadata, not a function-shaped hole.
    assert json.loads(value["text"]) == quote


def test_handles_in_cell_match_http_catalog(shop):
    """`catalog.all()` metadata equals the `tools` of `GET /v1/catalog`."""
    value = value_of(shop, "return catalog.all()")
    body = shop.get("/v1/catalog").json()
    assert value == body["tools"]


def test_describe_returns_parameters_and_output_schema(shop):
    """`track_package.describe()` has callableName, name, the input schema and the output schema."""
    value = value_of(
        shop,
        """
        const d = await track_package.describe();
        const [h] = await catalog.search("track_package");
        return {d, same: JSON.stringify(d) === JSON.stringify(await h.describe())};
    """,
    )
    d = value["d"]
    assert d["callableName"] == "track_package" and d["name"] == "track_package"
    assert d["source"] == "plugin" and d["label"] == "Track package"
    assert d["parameters"]["required"] == ["tracking_number"]
    assert d["parameters"]["properties"]["tracking_number"]["pattern"] == "^[A-Z0-9]{6,20}$"
    assert d["outputSchema"]["required"] == ["tracking_number", "status", "events"]
    assert "id" not in d and "plugin_id" not in d
    assert value["same"] is True


def test_global_and_searched_handle_return_identical_details_and_telemetry(shop):
    """Global and searched handle give the same details; telemetry: 1 search, 1 describe, 2 calls."""
    env = run(
        shop,
        """
        const [h] = await catalog.search("track_package");
        const d = await h.describe();
        const a = await track_package({tracking_number: "AB12345"});
        const b = await h({tracking_number: "AB12345"});
        return {a, b, name: d.callableName};
    """,
    )
    assert env["status"] == "completed", env
    value = env["value"]
    assert value["a"] == value["b"]
    assert value["a"]["tracking_number"] == "AB12345" and value["a"]["events"]
    assert value["name"] == "track_package"
    t = env["telemetry"]
    assert (t["search_count"], t["describe_count"], t["call_count"]) == (1, 1, 2)


def test_promise_all_over_several_tools(shop):
    """Several tools called concurrently with Promise.all all resolve with their own details."""
    env = run(
        shop,
        """
        const [q, t, c, s] = await Promise.all([
          quote_shipping({origin: "US", destination: "US", weight_kg: 1, service: "express"}),
          track_package({tracking_number: "ZZ99887766"}),
          list_carriers(),
          shipments({action: "status", shipment_id: "SHP-1002"}),
        ]);
        return {q, t: t.tracking_number, c: c.length, s};
    """,
    )
    assert env["status"] == "completed", env
    v = env["value"]
    assert v["q"]["service"] == "express" and v["q"]["carrier"] == "swiftfreight" and v["q"]["days"] == 1
    assert v["t"] == "ZZ99887766" and v["c"] == 3
    assert v["s"] == {"shipment_id": "SHP-1002", "status": "delivered", "destination": "FR", "found": True}
    assert env["telemetry"]["call_count"] == 4


def test_cell_without_network_tools_is_not_marked_untrusted(shop):
    """A cell that calls only trusted tools has no `untrusted_content` and plain text output."""
    env = run(shop, 'text("plain"); return await list_carriers()')
    assert env["status"] == "completed", env
    assert "untrusted_content" not in env
    assert env["output"] == [{"type": "text", "text": "plain"}]


def test_network_tool_marks_untrusted_and_wraps_only_text(shop):
    """After `news()` text entries are wrapped as untrusted; json entries and the value stay raw."""
    env = run(
        shop,
        """
        const n = await news();
        text("headline: " + n.headline);
        json({headline: n.headline});
        return n;
    """,
    )
    assert env["status"] == "completed", env
    assert env["untrusted_content"] is True
    assert env["value"] == {"headline": "remote says hi"}
    text_entry, json_entry = env["output"]
    assert text_entry["type"] == "text"
    assert text_entry["text"].startswith(BEGIN_MARKER) and text_entry["text"].endswith(END_MARKER)
    assert "headline: remote says hi" in text_entry["text"]
    assert json_entry == {"type": "json", "value": {"headline": "remote says hi"}}


def test_network_flag_applies_through_a_searched_handle(shop):
    """A plugin network tool (track_package) called through a handle also marks the cell untrusted."""
    env = run(
        shop,
        """
        const [h] = await catalog.search("track_package");
        const r = await h({tracking_number: "QQ123456"});
        text(r.events[0].note);
        return r.status;
    """,
    )
    assert env["status"] == "completed", env
    assert env["untrusted_content"] is True
    assert env["output"][0]["text"].startswith(BEGIN_MARKER)
    assert env["value"] in ("label_created", "in_transit", "delivered")


def test_search_over_the_query_caps_rejects_catchably(shop):
    """A query past 512 characters or 16 distinct words rejects with a RangeError; the cell goes on."""
    value = value_of(
        shop,
        """
        const out = [];
        for (const q of ["x".repeat(6e6), Array.from({length: 17}, (_, i) => "w" + i).join(" ")]) {
          try { await catalog.search(q); out.push("resolved"); } catch (e) { out.push([e.name, e.code, e.message]); }
        }
        out.push((await catalog.search("parcel")).length > 0);
        return out;
    """,
        memory_limit_bytes=256 * 1024 * 1024,
    )
    assert value[0][:2] == ["RangeError", "invalid_input"] and "(limit 512)" in value[0][2]
    assert value[1][:2] == ["RangeError", "invalid_input"] and "17 distinct words (limit 16)" in value[1][2]
    assert value[2] is True


def test_searches_past_the_cell_budget_reject_catchably(tmp_path):
    """With max_searches_per_cell=3 the 4th search rejects with search_budget_exceeded."""
    with make_client(tmp_path, tools=ToolSettings(plugins=(SHIPPING,)), max_searches_per_cell=3) as client:
        env = run(
            client,
            """
            const out = [];
            for (let i = 0; i < 5; i++) {
              try { out.push((await catalog.search("parcel")).length > 0); } catch (e) { out.push([e.name, e.code]); }
            }
            return out;
        """,
        )
        assert env["status"] == "completed", env
        assert env["value"] == [
            True,
            True,
            True,
            ["RangeError", "search_budget_exceeded"],
            ["RangeError", "search_budget_exceeded"],
        ]
        assert env["telemetry"]["search_count"] == 3
        assert run(client, 'return (await catalog.search("parcel")).length > 0')["value"] is True
