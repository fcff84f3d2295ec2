"""Before/after hooks around every native tool call, and the after-hook result merge.

A before-hook returns None (go on), new arguments, ``Block(reason)`` (refuse the call) or
``NeedsApproval(reason)`` (service.tools.approvals: the call waits for the API caller's approval).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from bridge.json_types import JsonValue
from service.tools.errors import ToolConfigError
from service.tools.result import ToolResult

if TYPE_CHECKING:
    from service.tools.context import ToolContext

__all__ = ["AfterResult", "Block", "Hook", "HookCall", "UNSET", "merge_after_result"]


class _Unset:
    """Marker for 'field not provided' (None is a real JSON value)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()


@dataclass(frozen=True)
class HookCall:
    """What a hook sees about one call: the tool, the arguments at this point, and the context."""

    tool_name: str
    callable_name: str
    tool_id: str
    plugin_id: str | None
    source: str
    params: JsonValue
    ctx: ToolContext


@dataclass(frozen=True)
class Block:
    """Returned by a before-hook to refuse a call; `reason` reaches the guest."""

    reason: str


@dataclass(frozen=True)
class AfterResult:
    """Partial override returned by an after-hook; fields left UNSET keep the tool's value.

    Merge rule (text and structured value are two channels): `details` replaces the structured value when given. Giving `text`
    without `details` drops the structured value (set to None), because it may no longer match the
    text; return both to keep it.
    """

    details: object = UNSET
    text: str | None | _Unset = UNSET
    is_error: object = UNSET


#: A before-hook returns None, new arguments, a Block or a NeedsApproval (or an awaitable of one).
BeforeFn = Callable[[HookCall], Awaitable[object] | object]
#: An after-hook gets the ToolResult and returns None, a ToolResult, an AfterResult or a dict.
AfterFn = Callable[[HookCall, ToolResult], Awaitable[object] | object]


@dataclass(frozen=True)
class Hook:
    """A pair of optional callbacks; `plugin_id` names the owner in error messages."""

    before: BeforeFn | None = None
    after: AfterFn | None = None
    plugin_id: str | None = None
    name: str = field(default="hook")

    def __post_init__(self) -> None:
        if self.before is None and self.after is None:
            raise ToolConfigError(f"{self._owner()}: add_hook needs before= or after= (a callable)")
        for label, fn in (("before", self.before), ("after", self.after)):
            if fn is not None and not callable(fn):
                raise ToolConfigError(f"{self._owner()}: {label}= must be callable, got {type(fn).__name__}")

    def _owner(self) -> str:
        return f'plugin "{self.plugin_id}"' if self.plugin_id else "hook"


async def maybe_await(value: object) -> object:
    """Await `value` if it is awaitable; hooks and tools may be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value


def merge_after_result(result: ToolResult, override: object) -> ToolResult:
    """Apply one after-hook's return value to a ToolResult and return the new ToolResult."""
    if override is None:
        return result
    if isinstance(override, ToolResult):
        return override
    if isinstance(override, Mapping):
        unknown = sorted(set(override) - {"details", "text", "is_error"})
        if unknown:
            raise TypeError(f"after-hook returned unknown fields: {', '.join(map(str, unknown))}")
        override = AfterResult(**override)
    if not isinstance(override, AfterResult):
        raise TypeError(
            f"after-hook must return None, a ToolResult, an AfterResult or a dict, got {type(override).__name__}"
        )
    details: object
    if override.details is not UNSET:
        details = override.details
    elif override.text is not UNSET:
        details = None
    else:
        details = result.details
    text = result.text if isinstance(override.text, _Unset) else override.text
    is_error = result.is_error if override.is_error is UNSET else bool(override.is_error)
    return ToolResult(details=details, text=text, is_error=is_error)
