"""Tool policy: allow/deny lists, groups, profiles, and narrowing policies.

Entries are tool names, tool ids, plugin ids, `group:core` (tools shipped with codemode) or
`group:plugins` (tools of loaded plugins). Deny always wins.

Base policy (the `[tools]` table):
  * the start set is the profile's groups plus the allow list; with neither, every non-optional tool;
  * an optional tool is enabled only when an allow entry names the tool (name or id) or its plugin id;
    groups and profiles never switch optional tools on.
Narrowing policies (per tenant / API key, per request) can only remove tools: a tool survives when
it matches their allow list (if they have one or a profile) and none of their deny entries.

Profiles: `none` (no native tools; client tools only), `minimal` (`group:core`),
`full` (`group:core` + `group:plugins`, the default).

MCP entries: `mcp:<server>` (a whole server), `mcp:<server>/<tool>` (one tool) and `mcp:*` (every
server); server and tool may be spelled as configured/listed or as their guest identifiers.  An allow
list restricts a kind of tool (native or MCP) only when it names at least one entry of that kind, so
`allow = ["mcp:docs"]` leaves native tools alone and `allow = ["echo"]` leaves MCP alone; an empty
allow list allows nothing.  A server named only tool by tool is visible with just those tools and
without its resources and prompts.  Profiles govern native tools only.

`approve` (same entry spelling) lists tools whose calls wait for a person's approval; it never
changes what is visible.  It is parsed here with the rest of a key's `tools` table and applied by
service.tools.approvals.

Entries that name nothing are refused (`unknown_entry`): a typo would silently hide, expose or leave
unasked what the operator meant.  Native names, ids, plugin ids and `mcp:<server>` are checked at
start; a bare name never matches an MCP tool.  The tools of an MCP server are known only once it is
connected, so `mcp:<server>/<tool>` entries are checked against each listing as it arrives
(`ListedToolCheck`) and a miss is reported then, without stopping anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from service.tools.errors import ToolConfigError

__all__ = [
    "GROUPS",
    "MCP_ALL",
    "PROFILES",
    "ListedToolCheck",
    "McpAccess",
    "McpVisibility",
    "PolicySubject",
    "ToolPolicy",
    "parse_entries",
    "unknown_entry",
]

GROUP_CORE = "group:core"
GROUP_PLUGINS = "group:plugins"
GROUPS = (GROUP_CORE, GROUP_PLUGINS)
PROFILES: Mapping[str, tuple[str, ...]] = {
    "none": (),
    "minimal": (GROUP_CORE,),
    "full": (GROUP_CORE, GROUP_PLUGINS),
}
_KEYS = ("allow", "deny", "profile", "approve")
_MAX_ENTRY_CHARS = 256
#: Tool names a report of an unlisted MCP tool shows (a server may list thousands).
_SHOWN_TOOLS = 8
MCP_PREFIX = "mcp:"
MCP_ALL = "mcp:*"


class McpAccess(IntEnum):
    """How much of one MCP server a policy shows (ordered: combining policies takes the minimum)."""

    NONE = 0  # hidden: no namespace, no declarations, calls refused as unknown
    TOOLS = 1  # only the tools an allow list names one by one; no resources or prompts
    ALL = 2  # every tool that is not denied, plus resources and prompts


def is_mcp_entry(entry: str) -> bool:
    return entry.startswith(MCP_PREFIX)


#: An entry naming a function a client answers (a /v1/monty client's, pydantic-ai's tools): the server
#: cannot know such names ahead, so they are kept as written and matched by name (service/monty_relay/).
CLIENT_PREFIX = "client:"


def is_client_entry(entry: str) -> bool:
    return entry.startswith(CLIENT_PREFIX)


def mcp_entry_server(entry: str) -> str:
    """The server part of an `mcp:` entry (`*` for `mcp:*`)."""
    return entry[len(MCP_PREFIX) :].split("/", 1)[0]


@dataclass(frozen=True)
class PolicySubject:
    """The facts about a tool that policy entries can match."""

    name: str
    tool_id: str
    plugin_id: str | None
    source: str  # "plugin" | "core"
    optional: bool = False

    def matches(self, entry: str, *, groups: bool = True) -> bool:
        """Does one policy entry select this tool? (`groups=False` ignores group entries.)"""
        if entry == GROUP_CORE:
            return groups and self.source == "core"
        if entry == GROUP_PLUGINS:
            return groups and self.source == "plugin"
        return entry in (self.name, self.tool_id) or (self.plugin_id is not None and entry == self.plugin_id)


@dataclass(frozen=True)
class ToolPolicy:
    """An allow/deny/profile triple; `allow=None` means no allow list was given.

    `approve` rides along (entries whose calls need approval); visibility never looks at it.
    """

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    profile: str | None = None
    approve: tuple[str, ...] = ()

    @classmethod
    def from_config(
        cls, data: Mapping[str, object] | None, *, where: str = "tools", ignore: Iterable[str] = ()
    ) -> ToolPolicy:
        """Parse `{allow, deny, profile, approve}`; errors name the bad key or entry (e.g. `tools.allow[1]`)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ToolConfigError(f"{where} must be a table with allow/deny/profile, got {type(data).__name__}")
        skip = set(ignore)
        unknown = sorted(str(k) for k in data if k not in _KEYS and k not in skip)
        if unknown:
            raise ToolConfigError(f"{where}.{unknown[0]}: unknown key; expected one of {', '.join(_KEYS)}")
        allow = data.get("allow")
        profile = data.get("profile")
        if profile is not None and (not isinstance(profile, str) or profile not in PROFILES):
            raise ToolConfigError(
                f"{where}.profile: unknown profile {profile!r}; expected one of {', '.join(PROFILES)}"
            )
        return cls(
            allow=None if allow is None else parse_entries(allow, f"{where}.allow"),
            deny=parse_entries(data.get("deny") or (), f"{where}.deny"),
            profile=profile,
            approve=parse_entries(data.get("approve") or (), f"{where}.approve"),
        )

    def _start_entries(self) -> tuple[str, ...] | None:
        native = tuple(e for e in self.allow or () if not is_mcp_entry(e))
        # An allow list that names only MCP entries does not restrict native tools (and vice versa).
        if self.profile is None and (self.allow is None or (self.allow and not native)):
            return None
        return (*PROFILES.get(self.profile or "none", ()), *native)

    def mcp_server(self, names: Iterable[str]) -> McpAccess:
        """How much of the MCP server known by `names` (config name, guest identifier) this policy shows."""
        wanted = {MCP_ALL, *(MCP_PREFIX + n for n in names)}
        if any(e in wanted for e in self.deny):
            return McpAccess.NONE
        allow = [e for e in self.allow or () if is_mcp_entry(e)]
        if self.allow is not None and not self.allow:
            return McpAccess.NONE  # `allow = []` allows nothing
        if not allow or any(e in wanted for e in allow):
            return McpAccess.ALL
        prefixes = tuple(w + "/" for w in wanted if w != MCP_ALL)
        return McpAccess.TOOLS if any(e.startswith(prefixes) for e in allow) else McpAccess.NONE

    def mcp_tool(self, server_names: Iterable[str], tool_names: Iterable[str]) -> bool:
        """Does this policy show the tool known by `tool_names` on the server known by `server_names`?"""
        servers = tuple(server_names)
        access = self.mcp_server(servers)
        if access is McpAccess.NONE:
            return False
        named = {f"{MCP_PREFIX}{s}/{t}" for s in servers for t in tool_names}
        if any(e in named for e in self.deny):
            return False
        return access is McpAccess.ALL or any(e in named for e in self.allow or ())

    def enables(self, tool: PolicySubject) -> bool:
        """As the base policy: is this tool enabled?"""
        if any(tool.matches(e) for e in self.deny):
            return False
        if tool.optional:
            # Opt-in tools need an explicit name/id/plugin entry; groups never switch them on.
            return any(tool.matches(e, groups=False) for e in self.allow or ())
        start = self._start_entries()
        return start is None or any(tool.matches(e) for e in start)

    def keeps(self, tool: PolicySubject) -> bool:
        """As a narrowing policy: may this (already enabled) tool stay?"""
        if any(tool.matches(e) for e in self.deny):
            return False
        start = self._start_entries()
        return start is None or any(tool.matches(e) for e in start)


@dataclass(frozen=True)
class McpVisibility:
    """The MCP servers and tools one caller may see: every policy in the chain must show them."""

    policies: tuple[ToolPolicy, ...] = ()

    @classmethod
    def of(cls, *policies: ToolPolicy | None) -> McpVisibility:
        return cls(tuple(p for p in policies if p is not None))

    def server(self, name: str, identifier: str) -> McpAccess:
        return min((p.mcp_server((name, identifier)) for p in self.policies), default=McpAccess.ALL)

    def tool(self, server: tuple[str, str], tool: tuple[str, str]) -> bool:
        return all(p.mcp_tool(server, tool) for p in self.policies)


def parse_entries(raw: object, where: str) -> tuple[str, ...]:
    """Policy entries checked one by one; ToolConfigError names the bad one (`tools.allow[1]`)."""
    if isinstance(raw, str) or not isinstance(raw, (list, tuple)):
        raise ToolConfigError(f"{where} must be a list of strings, got {type(raw).__name__}")
    out: list[str] = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(entry, str) or not entry.strip():
            raise ToolConfigError(f"{at}: must be a non-empty string, got {entry!r}")
        if entry != entry.strip() or len(entry) > _MAX_ENTRY_CHARS:
            raise ToolConfigError(
                f"{at}: {entry!r} must have no surrounding spaces and at most {_MAX_ENTRY_CHARS} chars"
            )
        if entry.startswith("group:") and entry not in GROUPS:
            raise ToolConfigError(f"{at}: unknown group {entry!r}; known groups: {', '.join(GROUPS)}")
        if is_mcp_entry(entry):
            _check_mcp_entry(entry, at)
        if is_client_entry(entry) and not entry[len(CLIENT_PREFIX) :]:
            raise ToolConfigError(f"{at}: {entry!r} names no function; use client:<name>")
        out.append(entry)
    return tuple(out)


def _check_mcp_entry(entry: str, at: str) -> None:
    server, slash, tool = entry[len(MCP_PREFIX) :].partition("/")
    if not server or (slash and not tool) or (server == "*" and slash):
        raise ToolConfigError(f"{at}: {entry!r} is not an MCP entry; use mcp:<server>, mcp:<server>/<tool> or mcp:*")


def unknown_entry(
    entries: Sequence[str], where: str, subjects: Sequence[PolicySubject], servers: Iterable[str]
) -> str | None:
    """The problem with the first entry naming nothing, or None: a native entry must name a tool, tool
    id or plugin id of `subjects`, an `mcp:` entry a server of `servers` (configured names and guest
    identifiers); groups always name something."""
    server_names = {"*", *servers}
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if entry in GROUPS or is_client_entry(entry):  # a client's names are its own: never known here
            continue
        if is_mcp_entry(entry):
            if mcp_entry_server(entry) not in server_names:
                known = ", ".join(sorted(server_names - {"*"})) or "(none)"
                return f"{at}: {entry!r} names no MCP server here; servers: {known}"
        elif not any(s.matches(entry, groups=False) for s in subjects):
            return f"{at}: {entry!r} names no tool, tool id or plugin id here" + _mcp_hint(entry, server_names - {"*"})
    return None


def _mcp_hint(entry: str, servers: set[str]) -> str:
    """How an MCP tool is spelt, for a bare entry that names no native tool (bare names never match MCP)."""
    if not servers:
        return ""
    known = sorted(servers)
    return (
        f"; MCP tools are written mcp:<server>/<tool>, e.g. {MCP_PREFIX + known[0] + '/' + entry!r}"
        f" (servers: {', '.join(known)})"
    )


class ListedToolCheck:
    """Reports `mcp:<server>/<tool>` entries naming no tool their server lists, once per entry.

    ``tables`` are (where, entries) pairs (`tools.deny`, `api_keys[2].tools.allow`, …).
    """

    def __init__(self, tables: Sequence[tuple[str, Sequence[str]]]) -> None:
        self._entries = [
            (f"{where}[{index}]", entry, *entry[len(MCP_PREFIX) :].split("/", 1))
            for where, entries in tables
            for index, entry in enumerate(entries)
            if is_mcp_entry(entry) and "/" in entry
        ]
        self._reported: set[str] = set()

    def problems(self, server: tuple[str, str], tools: Sequence[tuple[str, str]]) -> list[str]:
        """New problems of the entries for `server` (identifier, name) given its listed `tools` (identifier, name)."""
        mine = [e for e in self._entries if e[2] in server and e[0] not in self._reported]
        if not mine:
            return []
        listed = {spelling for pair in tools for spelling in pair}
        shown = ", ".join(repr(name[:64]) for _, name in tools[:_SHOWN_TOOLS]) + (
            ", …" if len(tools) > _SHOWN_TOOLS else ""
        )
        out = []
        for at, entry, _, tool in mine:
            if tool not in listed:
                self._reported.add(at)
                out.append(
                    f"{at}: {entry!r} names no tool MCP server {server[1]!r} lists ({len(tools)} tool{'' if len(tools) == 1 else 's'}: "
                    f"{shown or 'none'}); it has no effect unless the server lists such a tool"
                )
        return out
