"""MCP entries in tool policies: `mcp:<server>`, `mcp:<server>/<tool>`, `mcp:*`; per-kind allow lists."""

from __future__ import annotations

import pytest

from service.tools.catalog import ToolCatalog
from service.tools.errors import ToolConfigError
from service.tools.policy import ListedToolCheck, McpAccess, McpVisibility, ToolPolicy, unknown_entry

DOCS = ("docs", "docs")
WEB = ("web-ü", "web")  # configured name, guest identifier


def _policy(**data) -> ToolPolicy:
    return ToolPolicy.from_config(data)


def _server(policy: ToolPolicy, server=DOCS) -> McpAccess:
    return McpVisibility.of(policy).server(*server)


def _tool(policy: ToolPolicy, tool: str, server=DOCS) -> bool:
    return McpVisibility.of(policy).tool(server, (tool, tool))


def test_no_policy_shows_every_server_and_tool() -> None:
    """Without any policy every server is shown whole and every tool is visible."""
    assert _server(ToolPolicy()) is McpAccess.ALL
    assert _tool(ToolPolicy(), "crash")
    assert McpVisibility.of(None, None).server(*DOCS) is McpAccess.ALL


def test_deny_server_hides_it_and_every_tool() -> None:
    """`deny = ["mcp:docs"]` hides docs and its tools; other servers stay whole."""
    policy = _policy(deny=["mcp:docs"])
    assert _server(policy) is McpAccess.NONE
    assert not _tool(policy, "echo")
    assert _server(policy, WEB) is McpAccess.ALL


def test_deny_tool_hides_only_that_tool() -> None:
    """`deny = ["mcp:docs/crash"]` hides one tool; the server stays whole."""
    policy = _policy(deny=["mcp:docs/crash"])
    assert _server(policy) is McpAccess.ALL
    assert not _tool(policy, "crash") and _tool(policy, "echo")
    assert _tool(policy, "crash", WEB)


def test_deny_star_hides_every_server() -> None:
    """`mcp:*` in deny hides all MCP servers."""
    policy = _policy(deny=["mcp:*"])
    assert _server(policy) is _server(policy, WEB) is McpAccess.NONE


def test_server_and_tool_match_by_name_or_identifier() -> None:
    """Entries may spell the server as configured or as its guest identifier, the tool likewise."""
    assert _server(_policy(deny=["mcp:web"]), WEB) is McpAccess.NONE
    assert _server(_policy(deny=["mcp:web-ü"]), WEB) is McpAccess.NONE
    visibility = McpVisibility.of(_policy(deny=["mcp:docs/myTool"]))
    assert not visibility.tool(DOCS, ("my-tool", "myTool"))
    visibility = McpVisibility.of(_policy(deny=["mcp:docs/my-tool"]))
    assert not visibility.tool(DOCS, ("my-tool", "myTool"))


def test_allow_without_mcp_entries_leaves_mcp_alone() -> None:
    """An allow list naming only native tools does not restrict MCP."""
    policy = _policy(allow=["echo"])
    assert _server(policy) is McpAccess.ALL and _tool(policy, "crash")


def test_allow_with_mcp_entries_shows_only_those() -> None:
    """Once an allow list names an `mcp:` entry, servers it does not name are hidden."""
    policy = _policy(allow=["mcp:docs"])
    assert _server(policy) is McpAccess.ALL and _tool(policy, "crash")
    assert _server(policy, WEB) is McpAccess.NONE


def test_allow_single_tools_shows_them_without_the_rest() -> None:
    """`allow = ["mcp:docs/echo"]`: docs is shown tool by tool (no resources/prompts), only echo."""
    policy = _policy(allow=["mcp:docs/echo"])
    assert _server(policy) is McpAccess.TOOLS
    assert _tool(policy, "echo") and not _tool(policy, "crash")
    assert _server(policy, WEB) is McpAccess.NONE


def test_deny_wins_over_allow() -> None:
    """A denied tool stays hidden even when allow names it or its whole server."""
    policy = _policy(allow=["mcp:docs", "mcp:docs/crash"], deny=["mcp:docs/crash"])
    assert not _tool(policy, "crash") and _tool(policy, "echo")
    assert _server(_policy(allow=["mcp:*"], deny=["mcp:docs"])) is McpAccess.NONE


def test_empty_allow_list_allows_nothing() -> None:
    """`allow = []` hides every MCP server, as it hides every native tool."""
    assert _server(_policy(allow=[])) is McpAccess.NONE


def test_profile_does_not_govern_mcp() -> None:
    """Profiles select native tools only; `profile = "none"` leaves MCP visible."""
    assert _server(_policy(profile="none")) is McpAccess.ALL


def test_a_key_can_only_narrow_the_base_policy() -> None:
    """The visibility of base + key is the most restrictive of both: a key allow cannot reveal what the base hides."""
    base = _policy(allow=["mcp:docs/echo"])
    key = _policy(allow=["mcp:docs", "mcp:web"])
    both = McpVisibility.of(base, key)
    assert both.server(*DOCS) is McpAccess.TOOLS and both.server(*WEB) is McpAccess.NONE
    assert both.tool(DOCS, ("echo", "echo")) and not both.tool(DOCS, ("crash", "crash"))
    narrowed = McpVisibility.of(ToolPolicy(), _policy(deny=["mcp:docs/crash"]))
    assert not narrowed.tool(DOCS, ("crash", "crash")) and narrowed.tool(DOCS, ("echo", "echo"))


def test_mcp_only_allow_list_leaves_native_tools_alone(make_tool) -> None:
    """`allow = ["mcp:docs"]` keeps every native tool (base and narrowing); adding a native entry restricts them."""
    tools = [make_tool("quote", plugin_id="shipping"), make_tool("weather", plugin_id="meteo")]
    names = [e.callable_name for e in ToolCatalog.build(tools, policy=_policy(allow=["mcp:docs"])).view().entries()]
    assert names == ["quote", "weather"]
    view = ToolCatalog.build(tools).view(tenant_policy=_policy(allow=["mcp:docs"]))
    assert [e.callable_name for e in view.entries()] == ["quote", "weather"]
    view = ToolCatalog.build(tools).view(tenant_policy=_policy(allow=["mcp:docs", "quote"]))
    assert [e.callable_name for e in view.entries()] == ["quote"]


def test_mcp_entries_must_name_a_server_and_bare_names_a_native_tool(make_tool) -> None:
    """An `mcp:` entry is checked against the servers only; a bare name against native tools only, and the
    problem says how an MCP tool is spelt."""
    subjects = ToolCatalog.build([make_tool("quote", plugin_id="shipping")]).subjects
    assert (
        unknown_entry(["quote", "mcp:docs/echo", "mcp:web", "mcp:*"], "tools.deny", subjects, ["docs", "web"]) is None
    )
    assert (
        unknown_entry(["mcp:dcos"], "w", subjects, ["docs"])
        == "w[0]: 'mcp:dcos' names no MCP server here; servers: docs"
    )
    assert unknown_entry(["crash"], "api_keys[0].tools.deny", subjects, ["test"]) == (
        "api_keys[0].tools.deny[0]: 'crash' names no tool, tool id or plugin id here; MCP tools are written "
        "mcp:<server>/<tool>, e.g. 'mcp:test/crash' (servers: test)"
    )


def test_listed_tool_check_reports_each_unlisted_tool_entry_once() -> None:
    """`mcp:<server>/<tool>` entries are checked when the server lists its tools: a miss is reported once,
    in either spelling of server and tool; whole-server entries and other servers' entries are not."""
    check = ListedToolCheck(
        [("tools.deny", ("mcp:docs/crsh", "mcp:docs", "mcp:web/x")), ("api_keys[0].tools.allow", ("mcp:docs/myTool",))]
    )
    listed = [("echo", "echo"), ("myTool", "my-tool"), ("crash", "crash")]
    (problem,) = check.problems(("docs", "docs"), listed)
    assert problem.startswith("tools.deny[0]: 'mcp:docs/crsh' names no tool MCP server 'docs' lists (3 tools: ")
    assert "'echo', 'my-tool', 'crash'" in problem
    assert check.problems(("docs", "docs"), listed) == []  # reported once, not at every connection
    assert check.problems(("docs", "docs"), listed[:1]) == [
        "api_keys[0].tools.allow[0]: 'mcp:docs/myTool' "
        "names no tool MCP server 'docs' lists (1 tool: 'echo'); "
        "it has no effect unless the server lists such a tool"
    ]


@pytest.mark.parametrize("entry", ["mcp:", "mcp:/echo", "mcp:docs/", "mcp:*/echo"])
def test_malformed_mcp_entries_are_refused(entry: str) -> None:
    """Malformed `mcp:` entries are a config error naming the entry and the accepted forms."""
    with pytest.raises(ToolConfigError, match=r"tools\.deny\[0\].*mcp:<server>/<tool>"):
        _policy(deny=[entry])
