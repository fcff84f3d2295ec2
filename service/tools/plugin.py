"""Authoring API for native tools: ToolSpec, ToolContext, ToolResult, define_tool and the registry.

A plugin is a module with a ``register(registry)`` function::

    from service.tools.plugin import ToolRegistry, ToolResult

    def register(registry: ToolRegistry) -> None:
        @registry.tool(name="echo", description="Return the input.", input_schema={...})
        async def echo(call_id, params, ctx):
            return {"said": params["text"]}

The module may set ``PLUGIN_ID = "..."``; otherwise the id is the last part of its module name
(module paths) or the entry-point name (group ``codemode.plugins``).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bridge.json_types import JsonObject
from service.tools.context import ToolContext
from service.tools.errors import ToolConfigError
from service.tools.hooks import AfterFn, BeforeFn, Hook
from service.tools.result import ToolResult

__all__ = ["ToolContext", "ToolRegistry", "ToolResult", "ToolSpec", "define_tool", "schema_dict"]

_ID_RE = re.compile(r"^[A-Za-z0-9_.:$-]{1,128}$")
_MAX_NAME_CHARS = 128
EMPTY_INPUT_SCHEMA: JsonObject = {"type": "object", "properties": {}, "additionalProperties": False}

#: ``execute(call_id, params, ctx)``: a ToolResult or a JSON value, or an awaitable of one.
Execute = Callable[[str, JsonObject, "ToolContext"], Awaitable[object] | object]


def schema_dict(schema: object, *, what: str) -> JsonObject | None:
    """A JSON Schema dict from a dict or a pydantic model class (deep-copied, JSON-checked)."""
    if schema is None:
        return None
    model_json_schema = getattr(schema, "model_json_schema", None) if isinstance(schema, type) else None
    if callable(model_json_schema):
        schema = model_json_schema()
    if isinstance(schema, bool):
        schema = {} if schema else {"not": {}}
    if not isinstance(schema, Mapping):
        raise ToolConfigError(
            f"{what} must be a JSON Schema dict or a pydantic model class, got {type(schema).__name__}"
        )
    try:
        copied: JsonObject = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ToolConfigError(f"{what} is not JSON-serialisable: {exc}") from None
    return copied


@dataclass(frozen=True)
class ToolSpec:
    """The definition of one native tool.

    `execute(call_id, params, ctx)` may be async (preferred) or sync and returns a ToolResult or a
    JSON value (used as `details`). `optional` tools are only enabled when a policy allow list names
    the tool or its plugin id. `network` marks results derived from network content (untrusted).
    `idempotent` tools may be repeated: the host retries them when they raise a transient error
    (TimeoutError, ConnectionError, OSError).

    Failing (the tool failure contract): raise, return ``ToolResult(is_error=True)``, or return a dict with
    ``success: False`` (reason from ``stderr``/``error``/``msg``/``user_message``) or ``ok: False``
    (``error``/``msg``). Add ``error_type`` ("recoverable" when other arguments would work, "config",
    "transient"), ``need_param``, ``non_retriable: True`` (only for deployment problems: the tool is
    blocked for the run at once), ``user_message``, ``redirect`` and ``upstream``. A partial success is
    ``success: True`` with ``completed: False`` or a ``warning``.

    ``timeout_s`` is the tool's wall clock per call, in seconds (default: the ``tool_timeout_seconds``
    setting; a tool declaring more than ``tool_timeout_cap_seconds`` is refused at load).  A call past
    it is cancelled (``execute`` sees ``asyncio.CancelledError`` and may clean up) and rejects with
    ``tool_timeout``.
    """

    name: str
    description: str
    execute: Execute
    input_schema: object = None  # a JSON Schema dict, a pydantic model class, a bool or None
    output_schema: object = None
    label: str | None = None
    id: str | None = None
    optional: bool = False
    network: bool = False
    idempotent: bool = False
    plugin_id: str | None = None
    source: str = "plugin"
    timeout_s: float | None = None
    input_schema_json: JsonObject = field(init=False, repr=False, compare=False, default_factory=dict)
    output_schema_json: JsonObject | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        where = f'tool "{self.name}"' if isinstance(self.name, str) else "tool"
        if self.plugin_id:
            where = f'plugin "{self.plugin_id}" {where}'
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > _MAX_NAME_CHARS:
            raise ToolConfigError(f"{where}: name must be a non-empty string of at most {_MAX_NAME_CHARS} chars")
        if not isinstance(self.description, str):
            raise ToolConfigError(f"{where}: description must be a string")
        if self.label is not None and not isinstance(self.label, str):
            raise ToolConfigError(f"{where}: label must be a string or None")
        if not callable(self.execute):
            raise ToolConfigError(f"{where}: execute must be callable as execute(call_id, params, ctx)")
        if self.id is not None and (not isinstance(self.id, str) or not _ID_RE.match(self.id)):
            raise ToolConfigError(f"{where}: id {self.id!r} must match [A-Za-z0-9_.:$-]{{1,128}}")
        if self.source not in ("plugin", "core"):
            raise ToolConfigError(f'{where}: source must be "plugin" or "core", got {self.source!r}')
        for flag in ("optional", "network", "idempotent"):
            if not isinstance(getattr(self, flag), bool):
                raise ToolConfigError(f"{where}: {flag} must be true or false")
        if self.timeout_s is not None and (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, int | float)
            or not math.isfinite(self.timeout_s)
            or self.timeout_s <= 0
        ):
            raise ToolConfigError(f"{where}: timeout_s must be a positive number of seconds or None")
        input_json = schema_dict(self.input_schema, what=f"{where}: input_schema")
        object.__setattr__(
            self,
            "input_schema_json",
            input_json if input_json is not None else copy.deepcopy(EMPTY_INPUT_SCHEMA),
        )
        object.__setattr__(self, "output_schema_json", schema_dict(self.output_schema, what=f"{where}: output_schema"))

    @property
    def tool_id(self) -> str:
        """Stable id: explicit `id`, else `<plugin_id>.<name>`."""
        if self.id:
            return self.id
        return f"{self.plugin_id or self.source}.{self.name}"


def define_tool(
    *,
    name: str,
    description: str = "",
    input_schema: object = None,
    output_schema: object = None,
    label: str | None = None,
    id: str | None = None,
    optional: bool = False,
    network: bool = False,
    idempotent: bool = False,
    timeout_s: float | None = None,
) -> Callable[[Execute], ToolSpec]:
    """Decorator turning `async def fn(call_id, params, ctx)` into a ToolSpec (description: docstring)."""

    def wrap(fn: Execute) -> ToolSpec:
        text = description or (fn.__doc__ or "").strip()
        return ToolSpec(
            name=name,
            description=text,
            execute=fn,
            input_schema=input_schema,
            output_schema=output_schema,
            label=label,
            id=id,
            optional=optional,
            network=network,
            idempotent=idempotent,
            timeout_s=timeout_s,
        )

    return wrap


class ToolRegistry:
    """Collects the tools and hooks one plugin registers; handed to the plugin's register()."""

    def __init__(self, plugin_id: str, *, source: str = "plugin") -> None:
        if not isinstance(plugin_id, str) or not _ID_RE.match(plugin_id):
            raise ToolConfigError(f"plugin id {plugin_id!r} must match [A-Za-z0-9_.:$-]{{1,128}}")
        self.plugin_id = plugin_id
        self.source = source
        self._tools: list[ToolSpec] = []
        self._hooks: list[Hook] = []

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Tools registered so far, with plugin id and source filled in."""
        return tuple(self._tools)

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """Hooks registered so far."""
        return tuple(self._hooks)

    def add_tool(self, spec: ToolSpec | None = None, /, **fields: Any) -> ToolSpec:
        """Register a ToolSpec (or build one from keyword fields); returns the stored spec."""
        if spec is None:
            spec = ToolSpec(**fields)
        elif fields:
            raise ToolConfigError(f'plugin "{self.plugin_id}": pass a ToolSpec or keyword fields, not both')
        if not isinstance(spec, ToolSpec):
            raise ToolConfigError(f'plugin "{self.plugin_id}": add_tool expects a ToolSpec, got {type(spec).__name__}')
        if spec.plugin_id not in (None, self.plugin_id):
            raise ToolConfigError(
                f'plugin "{self.plugin_id}": tool "{spec.name}" declares plugin_id "{spec.plugin_id}"'
            )
        stored = replace(spec, plugin_id=self.plugin_id, source=self.source)
        if any(t.tool_id == stored.tool_id for t in self._tools):
            raise ToolConfigError(
                f'plugin "{self.plugin_id}": tool id "{stored.tool_id}" is registered twice; give each tool a unique id'
            )
        self._tools.append(stored)
        return stored

    def tool(self, **fields: Any) -> Callable[[Execute], ToolSpec]:
        """Decorator form of add_tool: `@registry.tool(name=..., input_schema=...)`."""

        def wrap(fn: Execute) -> ToolSpec:
            return self.add_tool(define_tool(**fields)(fn))

        return wrap

    def add_hook(self, *, before: BeforeFn | None = None, after: AfterFn | None = None) -> Hook:
        """Register hooks around every native tool call (before: rewrite or Block; after: override)."""
        hook = Hook(before=before, after=after, plugin_id=self.plugin_id)
        self._hooks.append(hook)
        return hook
