"""The guest's namespaces of host services for Python cells: catalog, tool handles, MCP, API, results.

Each namespace is an instance of a frozen dataclass with a ``namespace`` field that names it; the engine
hands it to Monty as a host object (``ClassInstance``): reading a field is local, and calling a method
pauses the cell at a function snapshot naming the object (the engine finds the instance by that id); ``route`` turns a method call into the same host request the
JavaScript prelude sends (``guest_runtime/quickjs/prelude/namespaces.js``), so the host checks and budgets
both languages' calls alike.  A forged ``namespace`` only names a request the host checks anyway.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
import uuid
from typing import Any

#: A handle's metadata fields a cell can read (the JavaScript handle's enumerable properties).
HANDLE_FIELDS = ("callableName", "toolName", "label", "description", "source", "input", "output", "blocked")


def _method(self: Any, *args: Any, **kwargs: Any) -> None:
    """A placeholder body: Monty never runs it, it pauses the cell at the call instead."""


@functools.lru_cache(maxsize=256)
def _namespace_class(name: str, fields: tuple[str, ...], methods: tuple[str, ...]) -> type:
    """A frozen dataclass; made once per shape (making one costs about 0.3 ms), a worker's cells share it."""
    spec: list[Any] = [("namespace", str)] + [(f, Any, dataclasses.field(default=None)) for f in fields]
    return dataclasses.make_dataclass(name, spec, namespace={m: _method for m in methods}, frozen=True)


@functools.lru_cache(maxsize=256)
def _root_class(servers: tuple[str, ...]) -> type:
    return dataclasses.make_dataclass("MCP", [(sid, Any) for sid in servers], frozen=True)


#: ``mcp`` is [server identifier, tool identifier] for an MCP tool's handle; hidden from its JSON, as in JS.
Handle = _namespace_class("ToolHandle", (*HANDLE_FIELDS, "mcp"), ("call", "describe"))
Catalog = _namespace_class("Catalog", (), ("search", "all"))
Api = _namespace_class("API", (), ("list", "read"))
Results = _namespace_class("Results", (), ("save", "load", "delete"))
Resources = _namespace_class("McpResources", (), ("list", "templates", "read"))
Prompts = _namespace_class("McpPrompts", (), ("list", "get"))
FIXED = [Handle, Catalog, Api, Results, Resources, Prompts]


def _identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def handle(meta: dict[str, Any]) -> Any:
    """A tool handle: its metadata as fields, ``await h.call(**input)`` and ``await h.describe()``."""
    return Handle(namespace="tool", **{k: meta.get(k) for k in (*HANDLE_FIELDS, "mcp")})


def handle_json(value: Any) -> dict[str, Any] | None:
    """A handle crosses as JSON as its metadata (as a JavaScript handle's ``toJSON``); other values: None.

    A handle the cell hands back is the host's own object, or, once the cell's snapshot was dumped and loaded,
    Monty's read-only stand-in for it (its fields in ``attributes``)."""
    if isinstance(value, Handle):
        return {k: getattr(value, k) for k in HANDLE_FIELDS if getattr(value, k) is not None}
    attributes = getattr(value, "attributes", None)
    if isinstance(attributes, dict) and attributes.get("namespace") == "tool":
        return {k: attributes[k] for k in HANDLE_FIELDS if attributes.get(k) is not None}
    return None


class Namespaces:
    """The global names of one cell's namespaces and the classes Monty must know to hand them back."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.handles = [handle(meta) for meta in cfg.get("tools", [])]
        self.tools = {h.callableName: h for h in self.handles}
        self.classes: list[type] = list(FIXED)
        servers = {}
        for server in cfg.get("mcp", []) + cfg.get("mcpUnavailable", []):
            sid = server.get("identifier")
            if not _identifier(sid):
                continue
            tools = tuple(t for t in server.get("tools", []) if _identifier(t) and t not in ("resources", "prompts"))
            cls = _namespace_class(f"MCP_{sid}", ("resources", "prompts"), tools)
            self.classes.append(cls)
            servers[sid] = cls(
                namespace=f"MCP.{sid}",
                resources=Resources(namespace=f"MCP.{sid}.resources"),
                prompts=Prompts(namespace=f"MCP.{sid}.prompts"),
            )
        root = _root_class(tuple(servers))
        self.classes.append(root)
        self.globals: dict[str, Any] = {
            "catalog": Catalog(namespace="catalog"),
            "API": Api(namespace="API"),
            "results": Results(namespace="results"),
            "MCP": root(**servers),
        }


def route(target: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The host request ``(method, arguments)`` of a namespace method call, or None for a local one."""
    ns = getattr(target, "namespace", None)
    if not isinstance(ns, str):
        raise TypeError("this object has no methods the host serves")
    if ns == "tool":
        name = target.callableName
        if method == "describe":
            return "describe", [name]
        if args:
            raise TypeError(f"{name}.call() takes the tool's input as keyword arguments")
        if target.source == "mcp" and isinstance(target.mcp, list) and len(target.mcp) == 2:
            return "mcp.call", [target.mcp[0], target.mcp[1], kwargs or None, 1 if kwargs else 0]
        return "tool", [name, kwargs]
    if ns == "catalog" and method == "search":
        query, limit = _two(args, kwargs, "query", "limit")
        if not isinstance(query, str):
            raise TypeError("catalog.search(query) needs a string query")
        return "search", [query, limit]
    if ns == "API":
        first, _ = _two(args, kwargs, "prefix" if method == "list" else "path", "")
        return f"api.{method}", [first]
    if ns == "results":
        first, _ = _two(args, kwargs, "value" if method == "save" else "id", "")
        return f"results.{method}", [first]
    if ns.startswith("MCP."):
        parts = ns.split(".")
        sid = parts[1]
        if len(parts) == 2:
            if args:
                raise TypeError(f"MCP.{sid}.{method}() takes the tool's input as keyword arguments")
            return "mcp.call", [sid, method, kwargs or None, 1 if kwargs else 0]
        if parts[2] == "resources":
            if method == "read":
                uri, _ = _two(args, kwargs, "uri", "")
                return "mcp.resources.read", [sid, uri]
            cursor, _ = _two(args, kwargs, "cursor", "")
            return f"mcp.resources.{method}", [sid, cursor]
        if method == "get":
            name, arguments = _two(args, kwargs, "name", "arguments")
            return "mcp.prompts.get", [sid, name, arguments or {}]
        cursor, _ = _two(args, kwargs, "cursor", "")
        return "mcp.prompts.list", [sid, cursor]
    return None


def _two(args: tuple[Any, ...], kwargs: dict[str, Any], first: str, second: str) -> tuple[Any, Any]:
    """Up to two arguments, by position or by name."""
    names = [first, second] if second else [first]
    unknown = set(kwargs) - set(names)
    if unknown or len(args) > len(names):
        raise TypeError(f"this call takes ({', '.join(names)}), not {sorted(unknown) or len(args)}")
    values = list(args) + [None] * (2 - len(args))
    return kwargs.get(first, values[0]), kwargs.get(second, values[1]) if second else None


#: Ids of host objects are derived from their names, so they survive a dump (``object_id``).
_IDS = uuid.UUID("6f1d3c52-5a0e-4f7e-9a51-3b1c0de0c0de")


def object_id(value: object) -> uuid.UUID | None:
    """The id the guest names a namespace object by: derived from its name (and a handle's tool), so a
    method call on it still routes after the cell's snapshot was dumped and loaded again."""
    namespace = getattr(value, "namespace", None)
    if not isinstance(namespace, str):
        return None
    if isinstance(value, Handle):
        namespace = f"tool:{getattr(value, 'callableName', '')}"
    return _named(namespace)


@functools.lru_cache(maxsize=4096)
def _named(name: str) -> uuid.UUID:
    """A name's id (a SHA-1 and a UUID each time: ~6 us; every cell names its namespaces again)."""
    return uuid.uuid5(_IDS, name)
