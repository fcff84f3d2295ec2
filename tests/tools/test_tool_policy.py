"""Tool policy: groups, plugin ids, optional tools, profiles, deny wins, narrowing."""

from __future__ import annotations

import pytest

from service.tools.catalog import ToolCatalog
from service.tools.errors import ToolConfigError, UnknownToolError
from service.tools.policy import ToolPolicy, unknown_entry


@pytest.fixture
def tools(make_tool):
    return [
        make_tool("read_file", plugin_id="codemode", source="core"),
        make_tool("quote", plugin_id="shipping"),
        make_tool("cancel", plugin_id="shipping", optional=True),
        make_tool("weather", plugin_id="meteo"),
    ]


def _names(tools, policy=None, **view) -> list[str]:
    return [e.callable_name for e in ToolCatalog.build(tools, policy=policy).view(**view).entries()]


def _policy(**data) -> ToolPolicy:
    return ToolPolicy.from_config(data)


def test_default_enables_every_non_optional_tool(tools) -> None:
    """No allow list: all core and plugin tools except optional ones."""
    assert _names(tools) == ["quote", "read_file", "weather"]


def test_groups_select_core_or_plugins(tools) -> None:
    """`group:core` selects shipped tools, `group:plugins` plugin tools."""
    assert _names(tools, _policy(allow=["group:core"])) == ["read_file"]
    assert _names(tools, _policy(allow=["group:plugins"])) == ["quote", "weather"]


def test_plugin_id_selects_its_tools(tools) -> None:
    """A plugin id allows all of that plugin's tools, including its optional ones."""
    assert _names(tools, _policy(allow=["shipping"])) == ["cancel", "quote"]


def test_optional_tool_needs_explicit_name(tools) -> None:
    """Groups and profiles never switch on optional tools; naming the tool does."""
    assert "cancel" not in _names(tools, _policy(allow=["group:plugins", "group:core"]))
    assert "cancel" not in _names(tools, _policy(profile="full"))
    assert "cancel" in _names(tools, _policy(allow=["group:plugins", "cancel"]))
    assert "cancel" in _names(tools, _policy(allow=["shipping.cancel"]))


def test_deny_wins_over_allow(tools) -> None:
    """An entry in deny removes a tool even when allow names it."""
    policy = _policy(allow=["shipping", "cancel"], deny=["cancel"])
    assert _names(tools, policy) == ["quote"]
    assert _names(tools, _policy(deny=["group:plugins"])) == ["read_file"]
    assert _names(tools, _policy(deny=["shipping"])) == ["read_file", "weather"]


def test_profiles(tools) -> None:
    """Profiles: `minimal` is core only, `full` core + plugins, `none` nothing; allow adds to them."""
    assert _names(tools, _policy(profile="minimal")) == ["read_file"]
    assert _names(tools, _policy(profile="full")) == ["quote", "read_file", "weather"]
    assert _names(tools, _policy(profile="none")) == []
    assert _names(tools, _policy(profile="minimal", allow=["weather"])) == ["read_file", "weather"]


def test_narrowing_only_removes(tools) -> None:
    """Tenant and request policies can remove tools but never add denied or optional ones."""
    base = _policy(allow=["group:plugins"], deny=["weather"])
    tenant = _policy(allow=["group:plugins", "group:core", "weather", "cancel"])
    assert _names(tools, base, tenant_policy=tenant) == ["quote"]
    assert _names(tools, base, tenant_policy=_policy(deny=["quote"])) == []
    request = _policy(allow=["quote"])
    assert _names(tools, None, tenant_policy=_policy(deny=["read_file"]), request_policy=request) == ["quote"]


def test_narrowing_keeps_optional_tool_enabled_by_base(tools) -> None:
    """A narrowing allow of the plugin keeps an optional tool the base enabled."""
    base = _policy(allow=["group:plugins", "cancel"])
    assert _names(tools, base, tenant_policy=_policy(allow=["shipping"])) == ["cancel", "quote"]


def test_denied_tool_cannot_be_reached(tools) -> None:
    """A denied tool has no handle, no describe, no entry, and search does not find it."""
    view = ToolCatalog.build(tools, policy=_policy(deny=["weather"])).view()
    assert "weather" not in [h["toolName"] for h in view.handles()]
    assert view.entry("weather") is None
    assert view.search("weather") == []
    with pytest.raises(UnknownToolError, match="not available in this cell"):
        view.describe("weather")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"allow": "quote"}, "tools.allow must be a list"),
        ({"allow": ["quote", ""]}, r"tools.allow\[1\]"),
        ({"deny": ["group:everything"]}, r"tools.deny\[0\]: unknown group 'group:everything'"),
        ({"profile": "extended"}, "tools.profile: unknown profile 'extended'"),
        ({"allowed": []}, "tools.allowed: unknown key"),
        ({"allow": [" quote"]}, r"tools.allow\[0\]"),
    ],
)
def test_bad_config_names_the_entry(data, message) -> None:
    """Config errors name the key or entry that is wrong."""
    with pytest.raises(ToolConfigError, match=message):
        ToolPolicy.from_config(data)


def test_config_can_ignore_sibling_keys() -> None:
    """The `[tools]` table's `plugins` key can be skipped by the caller."""
    policy = ToolPolicy.from_config({"plugins": ["x"], "deny": ["a"]}, ignore=["plugins"])
    assert policy == ToolPolicy(allow=None, deny=("a",), profile=None)


def test_the_first_entry_naming_nothing_is_reported_with_its_index(tools) -> None:
    """`unknown_entry` names the first entry that selects no tool, tool id or plugin id; groups always pass."""
    subjects = ToolCatalog.build(tools).subjects
    assert unknown_entry(["group:core", "quote", "shipping"], "tools.allow", subjects, []) is None
    problem = unknown_entry(["quote", "nosuch", "dangerous_operation"], "tools.allow", subjects, [])
    assert problem == "tools.allow[1]: 'nosuch' names no tool, tool id or plugin id here"


def test_client_entries_name_a_clients_functions_and_are_never_unknown(tools) -> None:
    """`client:<name>` names a function a /v1/monty client answers (its names are its own, unknown to the
    server): it is kept as written, while a bare `client:` is refused at parse."""
    subjects = ToolCatalog.build(tools).subjects
    assert unknown_entry(["client:send_email", "quote"], "api_keys[0].tools.deny", subjects, []) is None
    assert ToolPolicy.from_config({"deny": ["client:send_email"]}).deny == ("client:send_email",)
    with pytest.raises(ToolConfigError, match=r"tools.deny\[0\]: 'client:' names no function"):
        ToolPolicy.from_config({"deny": ["client:"]})
