"""The tool catalog: enabled tools with compiled contracts, and per-cell views with callable names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bridge import jsoncodec
from bridge.json_types import JsonObject
from service.tools.clocks import ToolClocks
from service.tools.contracts import ToolContract
from service.tools.errors import ClientToolDeclError, SchemaRefused, ToolConfigError, UnknownToolError
from service.tools.hooks import Hook
from service.tools.names import assign_callable_names
from service.tools.plugin import ToolSpec
from service.tools.policy import PolicySubject, ToolPolicy
from service.tools.schema_checks import remember_vetted, schema_problem_of
from service.tools.schema_guard import SchemaLimits, encode_caller_schema
from service.tools.search import SearchDoc, SearchIndex

__all__ = [
    "CatalogLimits",
    "CatalogView",
    "ClientTool",
    "ToolCatalog",
    "ToolEntry",
    "checked_client_tools",
    "client_entries",
    "compile_client_tools",
]

MAX_CLIENT_TOOLS = 128
_MAX_CLIENT_NAME = 128
_MAX_CLIENT_DESCRIPTION = 4096


@dataclass(frozen=True)
class CatalogLimits:
    """Search limits (reference §d): omitted limit -> default, larger -> max."""

    search_default_limit: int = 8
    max_search_limit: int = 50
    schemas: SchemaLimits = SchemaLimits()

    def __post_init__(self) -> None:
        if not 1 <= self.max_search_limit <= 50:
            raise ToolConfigError("max_search_limit must be between 1 and 50")
        if self.search_default_limit < 1:
            raise ToolConfigError("search_default_limit must be at least 1")
        # A lowered maximum also lowers the default (reference checklist 93).
        object.__setattr__(self, "search_default_limit", min(self.search_default_limit, self.max_search_limit))

    def clamp(self, limit: object) -> int:
        """The effective result count for a requested limit."""
        if limit is None or isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit != limit:
            return self.search_default_limit
        return max(1, min(int(limit), self.max_search_limit))


@dataclass(frozen=True)
class ClientTool:
    """A tool declared by the exec request and executed by the caller (SPEC §7.4)."""

    name: str
    description: str = ""
    input_schema: JsonObject | None = None


@dataclass(frozen=True)
class ToolEntry:
    """One tool as a cell sees it."""

    callable_name: str
    tool_name: str
    tool_id: str
    plugin_id: str | None
    source: str  # "plugin" | "core" | "client"
    label: str | None
    description: str
    input_schema: JsonObject | None
    output_schema: JsonObject | None
    network: bool
    optional: bool
    contract: ToolContract = field(repr=False, compare=False)
    spec: ToolSpec | None = field(default=None, repr=False, compare=False)
    timeout_s: float | None = None  # the wall clock of one call (service.tools.clocks); None: not on one

    @property
    def trusted(self) -> bool:
        """Installed plugin/core code is trusted; client metadata is not."""
        return self.source != "client"


@dataclass(frozen=True)
class _Native:
    spec: ToolSpec
    contract: ToolContract
    subject: PolicySubject
    timeout_s: float


class ToolCatalog:
    """Immutable set of enabled native tools (base policy applied) plus hooks."""

    def __init__(
        self,
        natives: tuple[_Native, ...],
        hooks: tuple[Hook, ...],
        limits: CatalogLimits,
        all_subjects: tuple[PolicySubject, ...],
    ) -> None:
        self._natives = natives
        self.hooks = hooks
        self.limits = limits
        self._all_subjects = all_subjects
        self._hint_cache: dict[str, tuple[str | None, str | None]] = {}
        # Views of a tenant policy alone (no client tools, no request policy): policies are immutable
        # and parsed once per API key, so this holds one view per key; views are read-only.
        self._views: dict[ToolPolicy | None, CatalogView] = {}

    @classmethod
    def build(
        cls,
        tools: Sequence[ToolSpec],
        hooks: Sequence[Hook] = (),
        policy: ToolPolicy | None = None,
        *,
        limits: CatalogLimits | None = None,
        clocks: ToolClocks | None = None,
    ) -> ToolCatalog:
        """Compile every contract and apply the base policy; duplicate tool ids, and a tool clock
        over the cap, are config errors."""
        policy = policy or ToolPolicy()
        clocks = clocks or ToolClocks()
        seen: dict[str, ToolSpec] = {}
        natives: list[_Native] = []
        subjects: list[PolicySubject] = []
        for spec in tools:
            if not isinstance(spec, ToolSpec):
                raise ToolConfigError(f"catalog tools must be ToolSpec objects, got {type(spec).__name__}")
            if spec.tool_id in seen:
                raise ToolConfigError(
                    f'tool id "{spec.tool_id}" is used by two tools '
                    f'(plugins "{seen[spec.tool_id].plugin_id}" '
                    f'and "{spec.plugin_id}"); give one of them a distinct id'
                )
            seen[spec.tool_id] = spec
            timeout_s = clocks.of(spec)  # every loaded tool, enabled or not: a plugin over the cap is refused
            subject = PolicySubject(spec.name, spec.tool_id, spec.plugin_id, spec.source, spec.optional)
            subjects.append(subject)
            if policy.enables(subject):
                contract = ToolContract(spec.input_schema_json, spec.output_schema_json)
                natives.append(_Native(spec, contract, subject, timeout_s))
        for hook in hooks:
            if not isinstance(hook, Hook):
                raise ToolConfigError(f"catalog hooks must be Hook objects, got {type(hook).__name__}")
        return cls(tuple(natives), tuple(hooks), limits or CatalogLimits(), tuple(subjects))

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Native tools enabled by the base policy."""
        return tuple(n.spec for n in self._natives)

    @property
    def subjects(self) -> tuple[PolicySubject, ...]:
        """Every loaded native tool, enabled or not, as policy entries see it."""
        return self._all_subjects

    def view(
        self,
        *,
        tenant_policy: ToolPolicy | None = None,
        request_policy: ToolPolicy | None = None,
        client_tools: Sequence[ClientTool | Mapping[str, object] | ToolEntry] = (),
    ) -> CatalogView:
        """The tools one cell sees: narrowed by tenant/request policy, client tools added and named.

        `client_tools` may be declarations or the entries `compile_client_tools` made from them
        (an exec request compiles its schemas once, off the event loop, before a worker is taken).
        """
        if not client_tools and request_policy is None:
            cached = self._views.get(tenant_policy)
            if cached is None:
                cached = self._views[tenant_policy] = self._view(tenant_policy, None, ())
            return cached
        return self._view(tenant_policy, request_policy, client_tools)

    def _view(
        self,
        tenant_policy: ToolPolicy | None,
        request_policy: ToolPolicy | None,
        client_tools: Sequence[ClientTool | Mapping[str, object] | ToolEntry],
    ) -> CatalogView:
        compiled = [t for t in client_tools if isinstance(t, ToolEntry)]
        declared = [t for t in client_tools if not isinstance(t, ToolEntry)]
        clients = compiled + list(compile_client_tools(declared, self.limits.schemas)) if declared else compiled
        client_names = {c.tool_name for c in clients}
        kept = [
            n
            for n in self._natives
            if all(p is None or p.keeps(n.subject) for p in (tenant_policy, request_policy))
            # One winner per exact name: a client tool shadows a native tool of the same name.
            and n.spec.name not in client_names
        ]
        pairs = [(n.spec.tool_id, n.spec.name) for n in kept] + [(c.tool_id, c.tool_name) for c in clients]
        names = assign_callable_names(pairs)
        entries = [self._native_entry(n, names[n.spec.tool_id]) for n in kept]
        entries += [_renamed(c, names[c.tool_id]) for c in clients]
        return CatalogView(self, entries)

    def _native_entry(self, native: _Native, callable_name: str) -> ToolEntry:
        spec = native.spec
        return ToolEntry(
            callable_name=callable_name,
            tool_name=spec.name,
            tool_id=spec.tool_id,
            plugin_id=spec.plugin_id,
            source=spec.source,
            label=spec.label,
            description=spec.description,
            input_schema=spec.input_schema_json,
            output_schema=spec.output_schema_json,
            network=spec.network,
            optional=spec.optional,
            contract=native.contract,
            spec=spec,
            timeout_s=native.timeout_s,
        )

    def hints(self, entry: ToolEntry) -> tuple[str | None, str | None]:
        """(input hint, output hint) for an entry; output only from a usable trusted schema."""
        if not entry.trusted:
            return "unknown", None
        if entry.tool_id not in self._hint_cache:
            self._hint_cache[entry.tool_id] = _render_hints(entry)
        return self._hint_cache[entry.tool_id]


class CatalogView:
    """What one cell sees; denied tools are simply absent."""

    def __init__(self, catalog: ToolCatalog, entries: list[ToolEntry]) -> None:
        self.catalog = catalog
        self._entries = {e.callable_name: e for e in sorted(entries, key=lambda e: e.callable_name)}
        self._index: SearchIndex | None = None  # built on the first search: most cells never search
        # Every tool's handle, made on the first ``handles()``: a view without client tools is shared by
        # every cell of its policy (``ToolCatalog.view``), so a cell's guest config reuses them.
        self._handles: list[JsonObject] | None = None

    def entry(self, callable_name: object) -> ToolEntry | None:
        """The entry for a callable name, or None (also for denied tools)."""
        return self._entries.get(callable_name) if isinstance(callable_name, str) else None

    def entries(self) -> list[ToolEntry]:
        """All entries, sorted by callable name."""
        return list(self._entries.values())

    def require(self, callable_name: object) -> ToolEntry:
        """The entry, or unknown_tool naming what was asked for."""
        found = self.entry(callable_name)
        if found is None:
            shown = callable_name if isinstance(callable_name, str) else type(callable_name).__name__
            raise UnknownToolError(f"tool {shown[:128]!r} is not available in this cell", tool=None)
        return found

    def handle(self, callable_name: str) -> JsonObject:
        """Guest metadata of one tool (no ids, no plugin ids, no nulls)."""
        entry = self.require(callable_name)
        meta: JsonObject = {"callableName": entry.callable_name, "toolName": entry.tool_name}
        if entry.label:
            meta["label"] = entry.label
        meta["description"] = entry.description
        meta["source"] = entry.source
        input_hint, output_hint = self.catalog.hints(entry)
        if input_hint is not None:
            meta["input"] = input_hint
        if output_hint is not None:
            meta["output"] = output_hint
        return meta

    def handles(self) -> list[JsonObject]:
        """Metadata of every tool in the view (what `catalog.all()` returns): shared, so never changed in place."""
        if self._handles is None:
            self._handles = [self.handle(name) for name in self._entries]
        return list(self._handles)

    def search(self, query: object, limit: object = None) -> list[JsonObject]:
        """Handles matching `query`: exact callable, then case-insensitive name, else ranked; clamped.

        Raises SearchQueryError for a query over the length or word caps (service.tools.search).
        """
        if not isinstance(query, str):
            return []
        if self._index is None:
            self._index = SearchIndex(
                [SearchDoc(e.callable_name, e.tool_name, e.label or "", e.description) for e in self._entries.values()]
            )
        keys = self._index.rank(query)[: self.catalog.limits.clamp(limit)]
        return [self.handle(key) for key in keys]

    def describe(self, callable_name: str) -> JsonObject:
        """Full description: handle metadata plus `parameters` and (trusted) `outputSchema`."""
        entry = self.require(callable_name)
        meta = self.handle(callable_name)
        out: JsonObject = {"callableName": entry.callable_name, "name": entry.tool_name}
        for key in ("label", "description", "source", "input", "output"):
            if key in meta:
                out[key] = meta[key]
        # Copies: the caller may serialise or annotate these without touching the catalog. Through the
        # codec, not copy.deepcopy: a client tool's 64 KiB schema of empty arrays costs ~5 ms, not ~50.
        out["parameters"] = jsoncodec.copied(entry.input_schema) if entry.input_schema is not None else {}
        if entry.trusted and entry.output_schema is not None:
            out["outputSchema"] = jsoncodec.copied(entry.output_schema)
        return out


def compile_client_tools(
    client_tools: Sequence[ClientTool | Mapping[str, object]], limits: SchemaLimits = SchemaLimits()
) -> tuple[ToolEntry, ...]:
    """Check and compile an exec request's client tools here; ClientToolDeclError names the bad field.

    Checking the most schema allowed costs about a second of CPU: an exec request checks it in a
    helper process instead (``ToolAccess.client_tools``: ``checked_client_tools``, a
    ``SchemaChecker``, then ``client_entries``).
    """
    checked = checked_client_tools(client_tools, limits)
    problems = {e: schema_problem_of(e, limits) for _, e in checked}
    return client_entries(checked, problems, None)


def checked_client_tools(
    client_tools: Sequence[ClientTool | Mapping[str, object]], limits: SchemaLimits
) -> list[tuple[ClientTool, bytes]]:
    """Each declaration with its schema's compact JSON, or ClientToolDeclError naming the field.

    Cheap and linear (no schema is walked in Python), so it runs on the event loop.
    """
    if len(client_tools) > MAX_CLIENT_TOOLS:
        raise ClientToolDeclError(
            f"client_tools: {len(client_tools)} client tools declared (cap {MAX_CLIENT_TOOLS} per request)",
            field="client_tools",
        )
    out: list[tuple[ClientTool, bytes]] = []
    seen: set[str] = set()
    total_bytes = total_objects = 0
    for index, tool in enumerate(client_tools):
        at = f"client_tools[{index}]"
        if isinstance(tool, Mapping):
            unknown = sorted(set(tool) - {"name", "description", "input_schema"})
            if unknown:
                raise ClientToolDeclError(f"{at}.{unknown[0]}: unknown field", field=f"{at}.{unknown[0]}")
            tool = ClientTool(**tool)  # type: ignore[arg-type]  # each field is checked below
        name = tool.name
        if not isinstance(name, str) or not name.strip() or len(name) > _MAX_CLIENT_NAME:
            raise ClientToolDeclError(
                f"{at}.name: must be a non-empty string of at most {_MAX_CLIENT_NAME} chars", field=f"{at}.name"
            )
        if name in seen:
            raise ClientToolDeclError(f"{at}.name: {name!r} is declared twice", field=f"{at}.name")
        seen.add(name)
        if not isinstance(tool.description, str) or len(tool.description) > _MAX_CLIENT_DESCRIPTION:
            raise ClientToolDeclError(
                f"{at}.description: must be a string of at most {_MAX_CLIENT_DESCRIPTION} chars",
                field=f"{at}.description",
            )
        encoded = b"{}"
        if tool.input_schema is not None:
            where = f"{at}.input_schema"
            try:
                encoded = encode_caller_schema(tool.input_schema, limits)
            except SchemaRefused as exc:
                raise ClientToolDeclError(f"{where}: {exc}", field=where) from None
            total_bytes += len(encoded)
            if total_bytes > limits.max_total_bytes:
                raise ClientToolDeclError(
                    f"{where}: the input schemas of client_tools[0..{index}] add up to {total_bytes} bytes "
                    f"of JSON (cap {limits.max_total_bytes} per request)",
                    field=where,
                )
            # An upper bound on the subschemas to check (a `{` inside a string counts too), found natively.
            total_objects += encoded.count(b"{")
            if total_objects > limits.max_total_objects:
                raise ClientToolDeclError(
                    f"{where}: the input schemas of client_tools[0..{index}] hold {total_objects} JSON objects "
                    f"(cap {limits.max_total_objects} per request); declare fewer or smaller schemas",
                    field=where,
                )
        out.append((tool, encoded))
    return out


def client_entries(
    checked: Sequence[tuple[ClientTool, bytes]], problems: Mapping[bytes, str | None], principal: str | None
) -> tuple[ToolEntry, ...]:
    """The catalog entries of checked declarations; ``problems`` holds each schema not vetted before for
    ``principal`` (the one the schemas are remembered for: None, for nobody)."""
    out: list[ToolEntry] = []
    for index, (tool, encoded) in enumerate(checked):
        problem = problems.get(encoded)
        if problem is not None:
            where = f"client_tools[{index}].input_schema"
            raise ClientToolDeclError(f"{where}: {problem}", field=where)
        out.append(
            ToolEntry(
                callable_name="",
                tool_name=tool.name,
                tool_id=f"client:{tool.name}",
                plugin_id=None,
                source="client",
                label=None,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=None,
                network=False,
                optional=False,
                contract=remember_vetted(encoded, principal),
            )
        )
    return tuple(out)


def _renamed(entry: ToolEntry, callable_name: str) -> ToolEntry:
    return replace(entry, callable_name=callable_name)


def _render_hints(entry: ToolEntry) -> tuple[str | None, str | None]:
    try:
        from service.api_files.hints import input_hint, output_hint
    except ImportError:
        return None, None
    try:
        out_hint = None
        if entry.output_schema is not None and entry.contract.problem is None:
            out_hint = output_hint(entry.output_schema)
        return input_hint(entry.input_schema), out_hint
    except Exception:  # noqa: BLE001 - a hint is optional metadata; never let it break the catalog
        return None, None
