"""Declaration files end to end: `API.list/read` in cells, `GET /v1/catalog`, `GET /v1/api/files[/path]`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.settings import ToolSettings
from tests.conftest import make_client, run

SHIPPING = "service.demo.shipping"
VISIBLE = ["blob", "echo", "fail", "list_carriers", "news", "quote_shipping", "shipments", "track_package"]
DECLARED_OUTPUT = ["list_carriers", "news", "quote_shipping", "shipments", "track_package"]
INVALID_PATHS = ["a/../b", "./x", "", "tools//echo.d.ts", "tools/.", "  ", ".."]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the shipping plugin and the test tools."""
    with make_client(tmp_path_factory.mktemp("decl"), tools=ToolSettings(plugins=(SHIPPING,))) as c:
        yield c


def value_of(client: TestClient, code: str, **fields) -> object:
    """Run a cell that must complete and return its value."""
    env = run(client, code, **fields)
    assert env["status"] == "completed", env
    return env["value"]


def test_api_list_has_results_and_a_file_per_visible_tool(shop):
    """`API.list()` lists results.d.ts and tools/<callableName>.d.ts for exactly the visible tools."""
    files = value_of(shop, "return (await API.list()).files")
    paths = [f["path"] for f in files]
    assert paths == ["results.d.ts"] + [f"tools/{name}.d.ts" for name in VISIBLE]
    results = files[0]
    assert results["bytes"] > 0 and results["description"]
    for f in files[1:]:
        name = f["path"][len("tools/") : -len(".d.ts")]
        assert f["description"].startswith(name + ": ")
        assert "bytes" not in f  # rendered on read, so the listing does not know the size


def test_api_list_prefix_with_and_without_trailing_slash(shop):
    """`API.list("tools")` and `API.list("tools/")` list the same tool files and nothing else."""
    a, b = value_of(shop, 'return [(await API.list("tools")).files, (await API.list("tools/")).files]')
    assert a == b
    assert [f["path"] for f in a] == [f"tools/{name}.d.ts" for name in VISIBLE]


def test_api_read_every_tool_file(shop):
    """Every tool file reads back with its path, a `declare function <name>(` and UTF-8 byte length."""
    env = run(
        shop,
        """
        const out = {};
        for (const f of (await API.list("tools")).files) out[f.path] = await API.read(f.path);
        return out;
    """,
    )
    assert env["status"] == "completed", env
    assert env["telemetry"]["call_count"] == 0  # reading declarations is not a tool call
    for name in VISIBLE:
        path = f"tools/{name}.d.ts"
        item = env["value"][path]
        assert item["path"] == path
        assert f"declare function {name}(" in item["content"]
        assert item["bytes"] == len(item["content"].encode("utf-8"))


def test_tool_declaration_matches_the_tool_contract(shop):
    """quote_shipping's file types its required/optional inputs and its declared output."""
    content = value_of(shop, 'return (await API.read("/tools/quote_shipping.d.ts")).content')
    assert "weight_kg: number" in content and "service?:" in content
    assert 'currency: "USD"' in content
    assert "Promise<unknown>" not in content


def test_discriminated_tool_declares_literal_selector_overloads(shop):
    """shipments' file maps each `action` literal to its own output branch."""
    content = value_of(shop, 'return (await API.read("tools/shipments.d.ts")).content')
    assert content.count("declare function shipments") == 2
    assert '"list":' in content and '"status":' in content
    assert "shipments: string[]" in content


def test_untyped_output_is_declared_unknown(shop):
    """A tool without an output schema is declared to return `Promise<unknown>`."""
    content = value_of(shop, 'return (await API.read("tools/echo.d.ts")).content')
    assert "Promise<unknown>" in content


@pytest.mark.parametrize("path", INVALID_PATHS)
def test_api_read_invalid_path_in_cell(shop, path):
    """`API.read` of a path with an empty, `.` or `..` segment rejects with "invalid API file path"."""
    code = f"try {{ await API.read({path!r}); return 'read'; }} catch (e) {{ return e.message; }}"
    message = value_of(shop, code)
    assert message == "invalid API file path"


def test_api_read_unknown_path_in_cell(shop):
    """`API.read` of an unlisted file rejects with "Unknown API file: <path>"."""
    message = value_of(shop, "try { await API.read('tools/nope.d.ts'); } catch (e) { return e.message; }")
    assert message == "Unknown API file: tools/nope.d.ts"


def test_http_api_files_list_equals_guest_list(shop):
    """`GET /v1/api/files` (and with a prefix) returns what `API.list` returns in a cell."""
    guest_all, guest_tools = value_of(shop, 'return [await API.list(), await API.list("tools")]')
    assert shop.get("/v1/api/files").json() == guest_all
    assert shop.get("/v1/api/files", params={"prefix": "tools/"}).json() == guest_tools


def test_http_api_file_read_equals_guest_read(shop):
    """`GET /v1/api/files/{path}` returns what `API.read(path)` returns in a cell, for every file."""
    guest = value_of(
        shop,
        """
        const out = {};
        for (const f of (await API.list()).files) out[f.path] = await API.read(f.path);
        return out;
    """,
    )
    for path, item in guest.items():
        r = shop.get(f"/v1/api/files/{path}")
        assert r.status_code == 200, r.text
        assert r.json() == item


@pytest.mark.parametrize("raw", ["a/%2E%2E/b", "%2E/x", "", "tools//echo.d.ts", "%20"])
def test_http_api_file_invalid_path(shop, raw):
    """Invalid paths over HTTP answer 422 "invalid API file path" naming the path parameter."""
    r = shop.get(f"/v1/api/files/{raw}")
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == "invalid API file path"
    assert r.json()["error"]["need_param"] == "path"


def test_http_api_file_unknown_path(shop):
    """An unknown file over HTTP answers 404 "Unknown API file: <path>"."""
    r = shop.get("/v1/api/files/tools/nope.d.ts")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Unknown API file: tools/nope.d.ts"


def test_http_api_files_invalid_prefix(shop):
    """An invalid prefix for the listing answers 422 "invalid API file path"."""
    r = shop.get("/v1/api/files", params={"prefix": "a/../b"})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "invalid API file path"


def test_catalog_quick_index_lines(shop):
    """`GET /v1/catalog` quick index: one `- name input -> output` line per tool, declared outputs first."""
    body = shop.get("/v1/catalog").json()
    assert [t["callableName"] for t in body["tools"]] == VISIBLE
    index = body["quick_index"]
    assert len(index) <= 8000
    lines = [line for line in index.splitlines() if line.startswith("- ")]
    names = [line.split(" ", 2)[1] for line in lines]
    assert sorted(names) == VISIBLE
    assert names[: len(DECLARED_OUTPUT)] == DECLARED_OUTPUT
    for line in lines:
        assert " -> " in line
        declared = not line.endswith(" -> ?")
        assert declared == (line.split(" ", 2)[1] in DECLARED_OUTPUT), line
    quote = next(line for line in lines if line.startswith("- quote_shipping "))
    handle = next(t for t in body["tools"] if t["callableName"] == "quote_shipping")
    assert quote == f"- quote_shipping {handle['input']} -> {handle['output']}"
    assert "Shipping" not in index and "Price a parcel" not in index  # descriptions are deferred


def test_catalog_rejects_a_bad_session_id(shop):
    """`GET /v1/catalog?session_id=` with a malformed id is 422 naming session_id."""
    r = shop.get("/v1/catalog", params={"session_id": "bad id!"})
    assert r.status_code == 422
    assert r.json()["error"]["need_param"] == "session_id"
