"""Tool policy (seed 004): allow/deny lists, groups, profiles, and narrowing policies.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from service.tools.errors import ToolConfigError

__all__ = ["GROUPS", "PROFILES", "PolicySubject", "ToolPolicy"]

GROUP_CORE = "group:core"
GROUP_PLUGINS = "group:plugins"
GROUPS = (GROUP_CORE, GROUP_PLUGINS)
PROFILES: Mapping[str, tuple[str, ...]] = {
    "none": (),
    "minimal": (GROUP_CORE,),
    "full": (GROUP_CORE, GROUP_PLUGINS),
}
_KEYS = ("allow", "deny", "profile")
_MAX_ENTRY_CHARS = 256


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
    """An allow/deny/profile triple; `allow=None` means no allow list was given."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    profile: str | None = None

    @classmethod
    def from_config(
        cls, data: Mapping[str, Any] | None, *, where: str = "tools", ignore: Iterable[str] = ()
    ) -> ToolPolicy:
        """Parse `{allow, deny, profile}`; errors name the bad key or entry (e.g. `tools.allow[1]`)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ToolConfigError(
                f"{where} must be a table with allow/deny/profile, got {type(data).__name__}"
            )
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
            allow=None if allow is None else _entries(allow, f"{where}.allow"),
            deny=_entries(data.get("deny") or (), f"{where}.deny"),
            profile=profile,
        )

    @property
    def restricts(self) -> bool:
        """True when this policy would remove anything as a narrowing policy."""
        return self.allow is not None or self.profile is not None or bool(self.deny)

    def entries(self) -> tuple[str, ...]:
        """All non-group entries (for reporting entries that match no tool)."""
        return tuple(e for e in (*(self.allow or ()), *self.deny) if e not in GROUPS)

    def _start_entries(self) -> tuple[str, ...] | None:
        if self.allow is None and self.profile is None:
            return None
        return (*PROFILES.get(self.profile or "none", ()), *(self.allow or ()))

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


def _entries(raw: Any, where: str) -> tuple[str, ...]:
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
        out.append(entry)
    return tuple(out)
