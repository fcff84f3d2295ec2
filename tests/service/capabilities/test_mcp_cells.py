"""MCP servers seen from cells, end to end: declarations, calls, resources, prompts, `$api`, surface rules.

One service per module talks to the SDK-built test server twice: over stdio (``docs``) and over
Streamable HTTP (``web-ü``, guest identifier ``web``; the non-ASCII name makes the declaration files'
UTF-8 byte counts differ from their character counts).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings_mcp import McpServerConfig
from service.tools.untrusted import BEGIN_MARKER, END_MARKER
from tests.conftest import make_client
from tests.conftest import run_ok as ok
from tests.mcp.conftest import HTTP_TOKEN, SERVER_SCRIPT, HttpServer

ONE_OBJECT = "MCP namespace tools accept one object argument."
SECRET = "stdio-secret-value-not-for-guests"
MCP_FILES = ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/web.d.ts"]
BOTH = pytest.mark.parametrize("server", ["docs", "web"])
#: The behaviour is the same in both guest languages: one test, the cell spelled per language.
LANGUAGES = pytest.mark.parametrize("language", ["javascript", "python"])


@pytest.fixture(scope="module")
def mcp_client(tmp_path_factory: pytest.TempPathFactory, web_server: HttpServer) -> Iterator[TestClient]:
    """A service with the test server over stdio (`docs`) and over HTTP (`web-ü`)."""
    servers = (
        McpServerConfig(
            name="docs",
            command=sys.executable,
            args=(SERVER_SCRIPT, "stdio"),
            env={"CODEMODE_TEST_SECRET": SECRET},
            timeout_ms=10000,
        ),
        McpServerConfig(name="web-ü", url=web_server.url, headers={"X-Test-Token": HTTP_TOKEN}, timeout_ms=10000),
    )
    with make_client(tmp_path_factory.mktemp("mcp"), mcp_servers=servers) as c:
        yield c


def value(client: TestClient, code: str, **fields: Any) -> Any:
    """Run a cell that must complete; return its value."""
    return ok(client, code, **fields)["value"]


CAUGHT = "try {{ return {{ok: await ({expr})}}; }} catch (e) {{ return {{name: e.name, message: e.message, code: e.code}}; }}"


def caught(client: TestClient, expr: str) -> dict[str, Any]:
    """Evaluate `expr` in a cell; `{ok}` if it resolved, else the caught error's name/message/code."""
    return value(client, CAUGHT.format(expr=expr))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def mcp_files(mcp_client: TestClient) -> dict[str, Any]:
    """What a cell sees for `API.list("mcp")`, `API.list("mcp/")` and `API.read` of each listed file."""
    return value(
        mcp_client,
        """
        const plain = await API.list("mcp");
        const slash = await API.list("mcp/");
        const read = {};
        for (const f of plain.files) read[f.path] = await API.read(f.path);
        return {plain, slash, read};
    """,
    )


# ---- discovery ---------------------------------------------------------------------------------


def test_api_list_with_and_without_slash_lists_index_and_one_file_per_server(mcp_files):
    """`API.list("mcp")` and `API.list("mcp/")` both list `mcp/index.d.ts` plus one file per server."""
    assert [f["path"] for f in mcp_files["plain"]["files"]] == MCP_FILES
    assert mcp_files["slash"] == mcp_files["plain"]


def test_listed_bytes_equal_read_bytes_equal_utf8_length(mcp_files):
    """Every MCP file's listed bytes equal its read bytes and the UTF-8 length of its content."""
    for item in mcp_files["plain"]["files"]:
        read = mcp_files["read"][item["path"]]
        utf8 = len(read["content"].encode("utf-8"))
        assert item["bytes"] == read["bytes"] == utf8, item["path"]
    web = mcp_files["read"]["mcp/web.d.ts"]["content"]
    assert "web-ü" in web and len(web.encode("utf-8")) > len(web)


def test_http_api_files_serve_the_same_mcp_files(mcp_client, mcp_files):
    """`GET /v1/api/files?prefix=mcp` and `GET /v1/api/files/mcp/<file>` match what the cell saw."""
    listed = mcp_client.get("/v1/api/files", params={"prefix": "mcp/"})
    assert listed.status_code == 200, listed.text
    assert listed.json() == mcp_files["plain"]
    for path in MCP_FILES:
        body = mcp_client.get(f"/v1/api/files/{path}").json()
        assert body["content"] == mcp_files["read"][path]["content"], path


def test_index_references_every_server_file(mcp_files):
    """`mcp/index.d.ts` references each server file and declares `MCP.$api()`."""
    index = mcp_files["read"]["mcp/index.d.ts"]["content"]
    assert '/// <reference path="./docs.d.ts" />' in index
    assert '/// <reference path="./web.d.ts" />' in index
    assert "function $api(): Promise<" in index


def test_server_file_declares_tools_with_collapsed_param_docs(mcp_files):
    """`mcp/docs.d.ts` declares `createIssue(` with its `@param` line collapsed and `title: string;`."""
    docs = mcp_files["read"]["mcp/docs.d.ts"]["content"]
    assert "function createIssue(" in docs
    assert "@param title Issue title Shown in tracker" in docs
    assert "title: string;" in docs
    assert "body?: string;" in docs and "labels?: string[];" in docs
    assert "namespace resources" in docs and "namespace prompts" in docs


def test_unsafe_tool_names_get_suffixes_in_file_and_runtime(mcp_client, mcp_files):
    """`delete`, `constructor` and `my-tool` are `delete2`, `constructor2`, `myTool` in the file and at runtime."""
    docs = mcp_files["read"]["mcp/docs.d.ts"]["content"]
    for ident in ("delete2", "constructor2", "myTool"):
        assert f"function {ident}(" in docs, ident
    got = value(
        mcp_client,
        """
        const kinds = ["delete2", "constructor2", "myTool"].map(k => typeof MCP.docs[k]);
        const texts = [];
        for (const k of ["delete2", "constructor2", "myTool"]) texts.push((await MCP.docs[k]({})).content[0].text);
        return {kinds, texts, raw: ["delete", "my-tool"].map(k => k in MCP.docs), ctor: MCP.docs.constructor === undefined};
    """,
    )
    assert got == {
        "kinds": ["function"] * 3,
        "texts": ["delete", "constructor", "my-tool"],
        "raw": [False, False],
        "ctor": True,
    }


# ---- calls -------------------------------------------------------------------------------------


@BOTH
def test_promise_all_runs_mcp_calls_concurrently(mcp_client, server):
    """Three `sleep_echo` calls in one `Promise.all` run at once on the server (it counts the calls in
    flight; each sleeps until all three do, or 5 s), results in order."""
    env = ok(
        mcp_client,
        f"""
        const r = await Promise.all([1, 2, 3].map(v => MCP.{server}.sleep_echo({{seconds: 5, together: 3, value: v}})));
        return r.map(x => [x.structuredContent.value, x.structuredContent.in_flight]);
    """,
    )
    assert [value for value, _ in env["value"]] == [1, 2, 3]
    assert max(in_flight for _, in_flight in env["value"]) == 3, env["value"]
    assert env["telemetry"]["call_count"] == 3


@BOTH
@LANGUAGES
def test_schema_defaults_are_filled_before_the_call(mcp_client, server, language):
    """`createIssue({title})` reaches the server with `body: ""` and `labels: ["triage"]`; given keys win."""
    cells = {
        "javascript": f"""
        const a = await MCP.{server}.createIssue({{title: "t"}});
        const b = await MCP.{server}.createIssue({{title: "u", body: "b", labels: []}});
        return [a.structuredContent.seen, b.structuredContent.seen];
    """,
        "python": f"""
a = await MCP.{server}.createIssue(title="t")
b = await MCP.{server}.createIssue(title="u", body="b", labels=[])
[a["structuredContent"]["seen"], b["structuredContent"]["seen"]]
""",
    }
    got = value(mcp_client, cells[language], language=language)
    assert got == [{"title": "t", "body": "", "labels": ["triage"]}, {"title": "u", "body": "b", "labels": []}]


def test_missing_required_argument_is_named(mcp_client):
    """`createIssue({})` rejects catchably, naming the tool and the missing `title`."""
    err = caught(mcp_client, "MCP.docs.createIssue({body: 'x'})")
    assert "ok" not in err, err
    assert "MCP.docs.createIssue" in err["message"] and "title" in err["message"], err
    assert "body" not in err["message"].split(":")[-1]


@pytest.mark.parametrize("args", ["5", '"text"', "null", "[1, 2]", "{a: 1, b: 2}, {}", "{a: 1}, 2"])
def test_non_object_or_two_arguments_are_refused(mcp_client, args):
    """A non-object argument or two arguments reject with TypeError "MCP namespace tools accept one object argument."."""
    err = caught(mcp_client, f"MCP.docs.add({args})")
    assert err == {"name": "TypeError", "message": ONE_OBJECT, "code": "invalid_input"}


@BOTH
def test_raw_result_keeps_block_fields_and_drops_top_level_meta(mcp_client, server):
    """`echo` resolves to `{content}` with block annotations and block `_meta`, no top-level `_meta`."""
    got = value(mcp_client, f'return await MCP.{server}.echo({{text: "hi"}})')
    assert got == {
        "content": [
            {
                "type": "text",
                "text": "hi",
                "annotations": {"audience": ["user"], "priority": 0.5},
                "_meta": {"source": "test"},
            }
        ]
    }


@BOTH
def test_structured_content_is_returned(mcp_client, server):
    """`add` resolves to text content plus `structuredContent` and no `isError`."""
    got = value(mcp_client, f"return await MCP.{server}.add({{a: 2, b: 3}})")
    assert got == {"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}}


@BOTH
def test_is_error_result_resolves(mcp_client, server):
    """A tool result with `isError: true` resolves (the cell completes) instead of throwing."""
    got = value(mcp_client, f"const r = await MCP.{server}.fail({{}}); return r;")
    assert got == {"content": [{"type": "text", "text": "it broke"}], "isError": True}


def test_is_error_results_count_against_the_run(mcp_client):
    """isError results keep resolving but count as failures: the 5th call of the run is tool_blocked."""
    import uuid

    sid = "s-" + uuid.uuid4().hex[:12]
    got = value(
        mcp_client,
        """
        const out = [];
        for (let i = 0; i < 5; i++) {
          try { out.push((await MCP.docs.fail({n: i})).isError); } catch (e) { out.push(e.code); }
        }
        return out;
    """,
        session_id=sid,
        run_id="r1",
    )
    assert got == [True, True, True, True, "tool_blocked"]
    report = mcp_client.get(f"/v1/sessions/{sid}/runs/r1").json()
    assert report["failures"] == {"MCP.docs.fail": 4} and report["blocked"][0]["tool"] == "MCP.docs.fail"


# ---- resources and prompts ---------------------------------------------------------------------


@BOTH
@LANGUAGES
def test_resources_list_and_read_in_mcp_shapes(mcp_client, server, language):
    """`resources.list()` and `resources.read(uri | {uri})` (Python: `read(uri)` or `read(uri=...)`) return the
    native MCP shapes."""
    cells = {
        "javascript": f"""
        const ns = MCP.{server}.resources;
        return [await ns.list(), await ns.read("docs://readme"), await ns.read({{uri: "docs://pages/intro"}})];
    """,
        "python": f"""
ns = MCP.{server}.resources
[await ns.list(), await ns.read("docs://readme"), await ns.read(uri="docs://pages/intro")]
""",
    }
    got = value(mcp_client, cells[language], language=language)
    listing, readme, page = got
    assert listing == {
        "resources": [
            {"name": "readme", "uri": "docs://readme", "description": "The readme.", "mimeType": "text/plain"}
        ]
    }
    assert readme == {"contents": [{"uri": "docs://readme", "mimeType": "text/plain", "text": "Read me first."}]}
    assert page == {"contents": [{"uri": "docs://pages/intro", "mimeType": "text/plain", "text": "Page intro"}]}


@BOTH
@LANGUAGES
def test_resource_templates_page_by_page_in_the_mcp_shape(mcp_client, server, language):
    """`resources.templates()` answers the first page with `nextCursor`; `templates({cursor})` (Python:
    `templates(cursor=...)`) the next one."""
    cells = {
        "javascript": f"""
        const first = await MCP.{server}.resources.templates();
        return [first, await MCP.{server}.resources.templates({{cursor: first.nextCursor}})];
    """,
        "python": f"""
first = await MCP.{server}.resources.templates()
[first, await MCP.{server}.resources.templates(cursor=first["nextCursor"])]
""",
    }
    got = value(mcp_client, cells[language], language=language)
    assert got == [
        {
            "resourceTemplates": [{"name": "page", "uriTemplate": "docs://pages/{name}", "mimeType": "text/plain"}],
            "nextCursor": "1",
        },
        {
            "resourceTemplates": [
                {"name": "section", "uriTemplate": "docs://pages/{name}/{section}", "mimeType": "text/plain"}
            ]
        },
    ]


@pytest.mark.parametrize("method", ["resources.list", "resources.templates", "prompts.list"])
def test_a_cursor_that_is_not_a_string_is_refused(mcp_client, method):
    """`list({cursor: 5})` rejects with a TypeError naming the cursor, before anything reaches the server."""
    err = caught(mcp_client, f"MCP.docs.{method}({{cursor: 5}})")
    assert err["name"] == "TypeError" and err["code"] == "invalid_input" and "cursor" in err["message"], err


@BOTH
@LANGUAGES
def test_prompts_list_and_get_in_mcp_shapes(mcp_client, server, language):
    """`prompts.list()`, `prompts.get(name, args)` and `prompts.get({name, arguments})` (Python:
    `get(name=..., arguments=...)`) return MCP shapes."""
    cells = {
        "javascript": f"""
        const ns = MCP.{server}.prompts;
        return [await ns.list(), await ns.get("greet", {{name: "Ann"}}),
                await ns.get({{name: "greet", arguments: {{name: "Bob"}}}})];
    """,
        "python": f"""
ns = MCP.{server}.prompts
[await ns.list(), await ns.get("greet", {{"name": "Ann"}}), await ns.get(name="greet", arguments={{"name": "Bob"}})]
""",
    }
    got = value(mcp_client, cells[language], language=language)
    listing, ann, bob = got
    assert listing == {
        "prompts": [
            {
                "name": "greet",
                "description": "Greet someone.",
                "arguments": [{"name": "name", "description": "Who", "required": True}],
            }
        ]
    }
    assert ann == {
        "description": "A greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello to Ann."}}],
    }
    assert bob["messages"][0]["content"]["text"] == "Say hello to Bob."


def test_unknown_resource_rejects_catchably_naming_the_server(mcp_client):
    """Reading a resource the server does not have rejects catchably with the server's name."""
    err = caught(mcp_client, 'MCP.docs.resources.read("docs://missing")')
    assert "ok" not in err and "'docs'" in err["message"] and err["code"].startswith("mcp_"), err


# ---- $api ---------------------------------------------------------------------------------------


def test_root_api_lists_servers_with_tool_counts(mcp_client):
    """`MCP.$api()` lists `{identifier, serverName, toolCount}` per server."""
    got = value(mcp_client, "return await MCP.$api()")
    assert got["servers"] == [
        {"identifier": "docs", "serverName": "docs", "toolCount": 13},
        {"identifier": "web", "serverName": "web-ü", "toolCount": 13},
    ]


def test_tool_api_has_schemas_only_when_asked(mcp_client):
    """`MCP.docs.$api("add", {schema: true})` carries input and output schemas; without the option it has none."""
    with_schema, without, server = value(
        mcp_client,
        """
        return [await MCP.docs.$api("add", {schema: true}), await MCP.docs.$api("add"), await MCP.docs.$api()];
    """,
    )
    assert with_schema["scope"] == "tool" and with_schema["header"]
    assert [t["callableName"] for t in with_schema["tools"]] == ["MCP.docs.add"]
    schemas = with_schema["schemas"]["add"]
    assert schemas["inputSchema"]["required"] == ["a", "b"]
    assert schemas["outputSchema"]["properties"] == {"sum": {"type": "number"}}
    assert "schemas" not in without and without["tools"] == with_schema["tools"]
    assert server["scope"] == "server" and "schemas" not in server
    assert len(server["tools"]) == 13
    assert {"createIssue", "delete2", "myTool"} <= {t["identifier"] for t in server["tools"]}


# ---- surface rules ------------------------------------------------------------------------------


def test_mcp_tools_absent_from_globals_catalog_all_and_quick_index(mcp_client):
    """MCP tools are not bare globals, not in `catalog.all()`, and not in the quick index."""
    got = value(
        mcp_client,
        """
        const names = ["createIssue", "create_issue", "sleep_echo", "add", "hang", "crash", "myTool", "delete2"];
        return {types: names.map(n => typeof globalThis[n]),
                all: catalog.all().map(h => [h.callableName, h.source])};
    """,
    )
    assert set(got["types"]) == {"undefined"}
    assert all(not name.startswith("MCP.") and source != "mcp" for name, source in got["all"]), got["all"]
    index = mcp_client.get("/v1/catalog").json()["quick_index"]
    assert "createIssue" not in index and "create-issue" not in index and "sleep_echo" not in index


def test_catalog_search_returns_callable_describable_mcp_handle(mcp_client):
    """`catalog.search("issue")` yields an MCP handle that can be called and `describe()`d."""
    got = value(
        mcp_client,
        """
        const found = await catalog.search("issue");
        const h = found.find(x => x.source === "mcp");
        const r = await h({title: "via handle"});
        return {meta: JSON.parse(JSON.stringify(h)), seen: r.structuredContent.seen, d: await h.describe()};
    """,
    )
    meta = got["meta"]
    assert meta["source"] == "mcp" and meta["callableName"] == "MCP.docs.createIssue"
    assert meta["apiPath"] == "mcp/docs.d.ts" and meta["toolName"] == "create-issue"
    assert "mcp" not in meta and "input" not in meta and "output" not in meta
    assert got["seen"] == {"title": "via handle", "body": "", "labels": ["triage"]}
    described = got["d"]
    assert described["kind"] == "mcp_api" and described["scope"] == "tool"
    assert described["server"] == {"identifier": "docs", "serverName": "docs"}
    assert described["schemas"]["createIssue"]["inputSchema"]["required"] == ["title"]


def test_mcp_result_marks_cell_untrusted_and_wraps_text_only(mcp_client):
    """After an MCP call, text output is wrapped as untrusted, json output and the value stay raw."""
    env = ok(
        mcp_client,
        """
        const r = await MCP.docs.echo({text: "remote words"});
        text("got " + r.content[0].text);
        json({t: r.content[0].text});
        return r.content[0].text;
    """,
    )
    assert env["untrusted_content"] is True
    assert env["bridge_dispatch_started"] is True and env["replay_safe"] is False
    text_entry, json_entry = env["output"]
    assert text_entry["text"].startswith(BEGIN_MARKER) and text_entry["text"].endswith(END_MARKER)
    assert "got remote words" in text_entry["text"]
    assert json_entry == {"type": "json", "value": {"t": "remote words"}}
    assert env["value"] == "remote words"


@pytest.mark.parametrize(
    "expr",
    [
        'MCP.docs.resources.read("docs://readme")',
        'MCP.docs.prompts.get("greet", {name: "x"})',
        "MCP.$api()",
        'MCP.docs.$api("echo")',
    ],
)
def test_every_mcp_result_kind_marks_the_cell_untrusted(mcp_client, expr):
    """Resources, prompts and `$api` results are network-derived: `untrusted_content` and wrapped text."""
    env = ok(mcp_client, f"const r = await {expr}; text(JSON.stringify(r)); return 1;")
    assert env["untrusted_content"] is True
    assert env["output"][0]["text"].startswith(BEGIN_MARKER)


def test_describe_of_mcp_handle_marks_the_cell_untrusted(mcp_client):
    """`describe()` of an MCP handle is its `$api` answer, so remote text read from it is wrapped."""
    env = ok(
        mcp_client,
        """
        const h = (await catalog.search("issue")).find(x => x.source === "mcp");
        text((await h.describe()).tools[0].description);
        return 1;
    """,
    )
    assert env.get("untrusted_content") is True, env
    assert env["output"][0]["text"].startswith(BEGIN_MARKER)


def test_cell_without_mcp_calls_has_no_dispatch_or_untrusted_mark(mcp_client):
    """A cell that only reads `typeof MCP.docs.echo` dispatches nothing and stays trusted."""
    env = ok(mcp_client, 'text("plain"); return typeof MCP.docs.echo;')
    assert env["value"] == "function"
    assert env["bridge_dispatch_started"] is False and "untrusted_content" not in env
    assert env["output"] == [{"type": "text", "text": "plain"}]


def test_secrets_stay_host_side(mcp_client, mcp_files):
    """Header tokens and env values never appear in declarations or `$api` answers (the server does get them)."""
    apis = value(
        mcp_client,
        """
        return [await MCP.$api(), await MCP.docs.$api(undefined, {schema: true}),
                await MCP.web.$api(undefined, {schema: true})];
    """,
    )
    seen = json.dumps([apis, mcp_files], ensure_ascii=False)
    assert HTTP_TOKEN not in seen and SECRET not in seen
    env_text = value(mcp_client, "return (await MCP.docs.env_value({})).content[0].text")
    assert env_text == SECRET


def test_zero_arguments_mean_an_empty_input_object(mcp_client):
    """`MCP.docs.fail()` (declared `input?`) runs with `{}`; `createIssue()` names its missing `title`."""
    got = value(
        mcp_client,
        """
        const r = await MCP.docs.fail();
        let err;
        try { await MCP.docs.createIssue(); } catch (e) { err = e.message; }
        return {r, err};
    """,
    )
    assert got["r"] == {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    assert "title" in got["err"] and got["err"] != ONE_OBJECT, got
