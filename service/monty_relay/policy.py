"""Which external functions a key's code may reach through /v1/monty: its ``[[api_keys]] tools`` narrowing.

The functions a Monty client answers (pydantic-ai's tools, say) are its own, like an exec's client tools,
but the key's table still holds: a name its ``deny`` names (``name`` or ``client:name``) is refused, and
an ``allow`` list that restricts tools (any entry that is not ``mcp:``, or an empty list) must name it.
Profiles choose native tool groups and say nothing of these names.  A refused name never reaches the
client: the relay answers the worker itself (service/monty_relay/relay.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from service.tools.policy import CLIENT_PREFIX, ToolPolicy, is_mcp_entry


@dataclass(frozen=True)
class FunctionPolicy:
    """A key's narrowing, asked per name."""

    policy: ToolPolicy | None

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is refused, or None when the key's code may call it."""
        policy = self.policy
        if policy is None:
            return None
        spellings = (name, CLIENT_PREFIX + name)
        why = f"codemode: this API key's tool policy does not allow {name!r}"
        if any(entry in spellings for entry in policy.deny):
            return why
        allow = policy.allow
        restricts = allow is not None and (not allow or any(not is_mcp_entry(e) for e in allow))
        if restricts and not any(entry in spellings for entry in allow or ()):
            return why
        return None
