"""MCP under per-key tool policy and per-tenant connections, with real API keys and the real MCP test server.

One service per module: `docs` (stdio, `per_tenant = false`: one connection shared by every tenant)
and `lab` (stdio, `per_tenant` unset: with several tenants configured, one process per tenant). Keys: `open` (no policy), `narrow` (denies `mcp:docs` and `mcp:lab/crash`),
`echoer` (allows native `echo` and `mcp:lab/echo` only), `nomcp` (denies `mcp:*`) and `other` (no policy).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.assembly import build_components
from service.errors import ConfigError
from service.settings import ApiKey, Settings, ToolSettings
from service.settings_load import load_settings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, value_of
from tests.mcp.conftest import SERVER_SCRIPT

STDIO = {"command": sys.executable, "args": (SERVER_SCRIPT, "stdio"), "timeout_ms": 10000}
SERVERS = (
    McpServerConfig(name="docs", per_tenant=False, **STDIO),  # type: ignore[arg-type]
    McpServerConfig(name="lab", **STDIO),  # type: ignore[arg-type]
)
KEYS = (
    ApiKey("key-open", "open"),
    ApiKey("key-narrow", "narrow", {"deny": ["mcp:docs", "mcp:lab/crash"]}),
    ApiKey("key-echoer", "echoer", {"allow": ["echo", "mcp:lab/echo"]}),
    ApiKey("key-nomcp", "nomcp", {"deny": ["mcp:*"]}),
    ApiKey("key-other", "other"),
)
OPEN, NARROW, ECHOER, NOMCP, OTHER = ({"Authorization": f"Bearer {k.key}"} for k in KEYS)

# Everything a cell can learn about the MCP surface, in one cell.
SURFACE = """
    const files = (await API.list("mcp")).files.map(f => f.path);
    const read = {};
    for (const p of ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/lab.d.ts"]) {
        try { read[p] = (await API.read(p)).content; } catch (e) { read[p] = "ERR " + e.message; }
    }
    const search = [];
    for (const q of ["echo", "Kills its own server", "issue"]) {
        for (const h of await catalog.search(q, {limit: 50})) search.push(h.callableName);
    }
    const labApi = {};
    try { labApi.tools = (await MCP.lab.$api()).tools.map(t => t.toolName); } catch (e) { labApi.error = e.code; }
    try { await MCP.lab.$api("crash"); labApi.crash = "found"; } catch (e) { labApi.crash = e.code; }
    return {
        members: Object.keys(MCP),
        labMembers: typeof MCP.lab === "object" ? Object.keys(MCP.lab) : null,
        root: (await MCP.$api()).servers.map(s => s.identifier),
        files, read, search, labApi,
    };
"""


@pytest.fixture(scope="module")
def svc_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    # One warm worker per tenant: workers are never shared across tenants, so fewer would be replaced often.
    with make_client(tmp_path_factory.mktemp("mcptenants"), mcp_servers=SERVERS, api_keys=KEYS, workers=len(KEYS)) as c:
        yield c


def exec_as(client: TestClient, headers: dict[str, str], code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, "timeout_ms": 15000, **fields}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def wait_as(client: TestClient, headers: dict[str, str], cell_id: str) -> dict[str, Any]:
    r = client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 15000}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def value(client: TestClient, headers: dict[str, str], code: str, **fields: Any) -> Any:
    return value_of(exec_as(client, headers, code, **fields))


@pytest.fixture(scope="module")
def surfaces(svc_client: TestClient) -> dict[str, Any]:
    """The MCP surface as each of the four keys sees it."""
    return {
        name: value(svc_client, headers, SURFACE)
        for name, headers in (("open", OPEN), ("narrow", NARROW), ("echoer", ECHOER), ("nomcp", NOMCP))
    }


def test_unrestricted_key_sees_every_server_and_tool(surfaces):
    """The key without a policy sees both servers, every tool, their files and search hits."""
    got = surfaces["open"]
    assert got["members"] == got["root"] == ["docs", "lab"]
    assert got["files"] == ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/lab.d.ts"]
    assert "function crash(" in got["read"]["mcp/lab.d.ts"]
    assert {"MCP.docs.echo", "MCP.lab.echo", "MCP.docs.crash", "MCP.lab.crash"} <= set(got["search"])
    assert "crash" in got["labApi"]["tools"] and got["labApi"]["crash"] == "found"


def test_denied_server_is_absent_from_every_cell_surface(surfaces):
    """`deny = ["mcp:docs"]`: no `MCP.docs`, no root entry, no file, no index reference, no search hit."""
    got = surfaces["narrow"]
    assert got["members"] == got["root"] == ["lab"]
    assert got["files"] == ["mcp/index.d.ts", "mcp/lab.d.ts"]
    assert got["read"]["mcp/docs.d.ts"].startswith("ERR Unknown API file")
    assert "docs" not in got["read"]["mcp/index.d.ts"]
    assert not [name for name in got["search"] if name.startswith("MCP.docs.")]


def test_denied_tool_is_absent_from_every_cell_surface(surfaces):
    """`deny = ["mcp:lab/crash"]`: no member, no declaration, no `$api` entry, `$api("crash")` unknown, no search hit."""
    got = surfaces["narrow"]
    assert "crash" not in got["labMembers"] and "echo" in got["labMembers"]
    assert "function crash(" not in got["read"]["mcp/lab.d.ts"] and "function echo(" in got["read"]["mcp/lab.d.ts"]
    assert "crash" not in got["labApi"]["tools"] and got["labApi"]["crash"] == "mcp_unknown_tool"
    assert "MCP.lab.crash" not in got["search"] and "MCP.lab.echo" in got["search"]


def test_allow_list_by_tool_shows_only_that_tool_and_narrows_native_tools(svc_client, surfaces):
    """`allow = ["echo", "mcp:lab/echo"]`: only `MCP.lab.echo` (no resources/prompts) and only native `echo`."""
    got = surfaces["echoer"]
    assert got["members"] == got["root"] == ["lab"]
    assert got["labApi"]["tools"] == ["echo"]
    assert "namespace resources" not in got["read"]["mcp/lab.d.ts"]
    assert set(got["search"]) == {"echo", "MCP.lab.echo"}
    calls = value(
        svc_client,
        ECHOER,
        """
        const echoed = (await MCP.lab.echo({text: "hi"})).content[0].text;
        let resources;
        try { await MCP.lab.resources.list(); resources = "listed"; } catch (e) { resources = e.code; }
        return {echoed, resources, native: [typeof echo, typeof fail]};
    """,
    )
    assert calls == {"echoed": "hi", "resources": "mcp_unknown_tool", "native": ["function", "undefined"]}


def test_deny_star_hides_every_server_and_opens_no_connection(svc_client, surfaces):
    """`deny = ["mcp:*"]`: an empty `MCP`, no files; no per-tenant process was started for that tenant."""
    got = surfaces["nomcp"]
    assert got["members"] == got["root"] == got["files"] == []
    assert not [name for name in got["search"] if name.startswith("MCP.")]
    hub = svc_client.app.state.services.mcp
    assert "nomcp" not in hub.tenant_connections("lab")
    assert {"open", "narrow", "echoer"} <= set(hub.tenant_connections("lab"))


def test_guessing_a_hidden_name_in_a_cell_finds_nothing(svc_client):
    """A cell of a restricted key cannot reach a hidden server or tool by writing its name."""
    got = value(
        svc_client,
        NARROW,
        """
        const out = {};
        try { await MCP.docs.echo({text: "x"}); out.docs = "called"; } catch (e) { out.docs = e.name; }
        try { await MCP.lab.crash({}); out.crash = "called"; } catch (e) { out.crash = e.name; }
        out.inDocs = "docs" in MCP;
        return out;
    """,
    )
    assert got == {"docs": "TypeError", "crash": "TypeError", "inDocs": False}


def test_http_declaration_routes_follow_the_key_policy(svc_client):
    """`GET /v1/api/files` and `/v1/api/files/{path}` show each key what its cells see."""

    def listing(headers: dict[str, str]) -> list[str]:
        r = svc_client.get("/v1/api/files", params={"prefix": "mcp/"}, headers=headers)
        assert r.status_code == 200, r.text
        return [f["path"] for f in r.json()["files"]]

    assert listing(OPEN) == ["mcp/index.d.ts", "mcp/docs.d.ts", "mcp/lab.d.ts"]
    assert listing(NARROW) == ["mcp/index.d.ts", "mcp/lab.d.ts"]
    assert listing(NOMCP) == []  # as on a service with no MCP servers
    assert svc_client.get("/v1/api/files/mcp/docs.d.ts", headers=NARROW).status_code == 404
    assert svc_client.get("/v1/api/files/mcp/docs.d.ts", headers=OPEN).status_code == 200
    lab = svc_client.get("/v1/api/files/mcp/lab.d.ts", headers=NARROW).json()["content"]
    assert "function echo(" in lab and "function crash(" not in lab
    catalog = svc_client.get("/v1/catalog", headers=ECHOER).json()
    assert [t["callableName"] for t in catalog["tools"]] == ["echo"] and "MCP." not in catalog["quick_index"]


def crash_during_in_flight_call(client: TestClient, server: str, victim: dict[str, str], gate: Path) -> dict[str, Any]:
    """Park a `victim` cell on a call to `server` that answers only once the test opens `gate` (a file),
    crash `server` as `open`, then open the gate and return the victim's envelope: the crash overlaps
    the call by construction, however slow the machine."""
    warm = f'return (await MCP.{server}.echo({{text: "up"}})).content[0].text'
    # Connected first: a cell with `timeout_ms: 300` does not wait for a server to start.
    assert value(client, victim, warm) == value(client, OPEN, warm) == "up"
    held = f"{{seconds: 120, until: {str(gate)!r}, value: 'answered'}}"
    parked = exec_as(
        client,
        victim,
        f"""
        try {{ return (await MCP.{server}.sleep_echo({held})).structuredContent.value; }}
        catch (e) {{ return e.code + ":" + e.errorType; }}
    """,
        timeout_ms=300,
    )
    assert parked["status"] == "waiting", parked  # parked with the MCP call in flight
    assert [p["tool"] for p in parked["pending_tool_calls"]] == [f"MCP.{server}.sleep_echo"]
    crash = f"try {{ await MCP.{server}.crash({{}}); return 'no'; }} catch (e) {{ return e.code; }}"
    assert value(client, OPEN, crash) == "mcp_unavailable"
    gate.touch()
    return wait_as(client, victim, parked["cell_id"])


@pytest.mark.slow
def test_crash_by_one_tenant_leaves_another_tenants_in_flight_call_answered(svc_client, tmp_path):
    """On a stdio server of a multi-tenant service (per tenant by default), `open` crashing its process
    does not fail `narrow`'s in-flight call."""
    done = crash_during_in_flight_call(svc_client, "lab", NARROW, tmp_path / "gate")
    assert done["status"] == "completed" and done["value"] == "answered", done
    again = value(svc_client, OPEN, 'return (await MCP.lab.echo({text: "restarted"})).content[0].text')
    assert again == "restarted"


@pytest.mark.slow
def test_crash_on_a_shared_server_fails_another_tenants_in_flight_call(svc_client, tmp_path):
    """With `per_tenant = false` one process serves every tenant: crashing it fails another tenant's
    in-flight call with a transient `mcp_unavailable`, and that tenant's next call is served."""
    done = crash_during_in_flight_call(svc_client, "docs", OTHER, tmp_path / "gate")
    assert done["status"] == "completed" and done["value"] == "mcp_unavailable:transient", done
    assert value(svc_client, OTHER, 'return (await MCP.docs.echo({text: "next"})).content[0].text') == "next"


# ---- the global policy and configuration -------------------------------------------------------


@pytest.mark.slow
def test_global_policy_hides_for_every_key_and_a_key_cannot_widen_it(tmp_path):
    """`[tools] allow = ["mcp:lab"]` hides docs from every key (a key allowing docs sees none); docs never starts."""
    keys = (ApiKey("key-open", "open"), ApiKey("key-docs", "wants-docs", {"allow": ["mcp:docs"]}))
    with make_client(
        tmp_path, mcp_servers=SERVERS, api_keys=keys, tools=ToolSettings(allow=("mcp:lab",), deny=("mcp:lab/crash",))
    ) as client:
        open_view = value(
            client,
            OPEN,
            """
            return {members: Object.keys(MCP), lab: Object.keys(MCP.lab).includes("crash"), native: typeof echo};
        """,
        )
        assert open_view == {"members": ["lab"], "lab": False, "native": "function"}
        docs_key = {"Authorization": "Bearer key-docs"}
        assert value(client, docs_key, "return Object.keys(MCP)") == []
        r = client.get("/v1/api/files", params={"prefix": "mcp/"}, headers=docs_key)
        assert [f["path"] for f in r.json()["files"]] == []
        hub = client.app.state.services.mcp
        assert [v.identifier for v in hub.views("open")] == ["lab"]  # the hidden shared server was never connected


@pytest.mark.parametrize("where", ["tools", "key"])
def test_mcp_entry_naming_no_configured_server_is_a_config_error(tmp_path, where):
    """A typo in an `mcp:` entry stops the service at start, naming the entry and the configured servers."""
    settings = Settings(workers=1, data_dir=str(tmp_path), mcp_servers=SERVERS)
    if where == "tools":
        settings = settings.replace(tools=ToolSettings(deny=("mcp:dcos",)))
    else:
        settings = settings.replace(api_keys=(ApiKey("k", "t", {"allow": ["mcp:dcos/echo"]}),))
    with pytest.raises(ConfigError, match=r"'mcp:dcos.*' names no MCP server here; servers: docs, lab"):
        build_components(settings, store=False)


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "codemode.toml"
    path.write_text(text)
    return str(path)


def test_per_tenant_keys_are_read_from_the_config_file(tmp_path):
    """`per_tenant`, `max_tenant_connections` and `tenant_idle_seconds` are parsed; the defaults are 8 and 300."""
    settings = load_settings(
        environ={},
        config_path=_toml(
            tmp_path,
            """
        [mcp.servers.lab]
        command = "lab-server"
        per_tenant = true
        max_tenant_connections = 3
        tenant_idle_seconds = 60
        [mcp.servers.docs]
        command = "docs-server"
    """,
        ),
    )
    lab, docs = settings.mcp_servers
    assert (lab.per_tenant, lab.max_tenant_connections, lab.tenant_idle_seconds) == (True, 3, 60)
    assert (docs.per_tenant, docs.max_tenant_connections, docs.tenant_idle_seconds) == (None, 8, 300)


@pytest.mark.parametrize("per_tenant", [None, False])
def test_an_eager_stdio_server_of_a_multi_tenant_service_must_say_it_is_shared(tmp_path, per_tenant):
    """With two tenants an eager stdio server with `per_tenant` unset stops the service at start, saying what to
    choose; `per_tenant = false` (one shared process) starts."""
    server = McpServerConfig(name="boot", startup="eager", per_tenant=per_tenant, **STDIO)  # type: ignore[arg-type]
    settings = Settings(workers=1, data_dir=str(tmp_path), mcp_servers=(server,), api_keys=(KEYS[0], KEYS[4]))
    if per_tenant is None:
        with pytest.raises(ConfigError, match=r"'boot'.*one process per tenant.*per_tenant = false") as info:
            build_components(settings, store=False)
        assert info.value.need_param == "mcp.servers.boot"
    else:
        assert build_components(settings, store=False).mcp is not None


@pytest.mark.parametrize(
    "body, message",
    [
        ('per_tenant = "yes"', "'per_tenant' must be true or false"),
        ("per_tenant = true\nmax_tenant_connections = 0", "'max_tenant_connections' must be a positive integer"),
        ("per_tenant = true\ntenant_idle_seconds = -1", "'tenant_idle_seconds' must be a positive integer"),
        ('per_tenant = true\nstartup = "eager"', "drop startup"),
    ],
)
def test_bad_per_tenant_settings_are_refused_naming_the_server(tmp_path, body, message):
    """Bad per-tenant settings stop the service at start with a message naming the server and the key."""
    with pytest.raises(ConfigError, match=f"mcp.servers.lab.*{message}"):
        load_settings(environ={}, config_path=_toml(tmp_path, f'[mcp.servers.lab]\ncommand = "x"\n{body}\n'))
