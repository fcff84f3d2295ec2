"""The MCP facade without the SDK: its four tools and the declaration resources, for one caller's key.

Every tool reaches the cell registry exactly as the HTTP routes do (``cell_spec`` builds the cell,
``svc.cells`` runs it), so every limit, cap and tenant boundary of the HTTP API applies.  Arguments
are validated with the HTTP request models themselves (same bounds, same patterns); a bad argument
or a service error (capacity, unknown cell) is a tool result with ``is_error`` and a message naming
the cause, which is what a model can act on.  ``sdk_server`` turns these plain answers into the SDK's
types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from bridge import jsoncodec
from bridge.json_types import JsonObject, JsonValue
from service.api.exec import cell_spec, parsed, wait_answers
from service.api.schemas import ID_PATTERN, CellEnvelope, ExecRequest, WaitRequest
from service.assembly import Components
from service.cells.envelopes import SealedEnvelope
from service.cluster.relay import call_holder, held_elsewhere
from service.errors import InvalidRequest, NotFound, ResponseNotEncodable, ServiceError
from service.handlers.api_files import list_api_files, quick_index, read_api_file
from service.mcp.guest_requests import search_mcp_tools
from service.mcp.scope import listed_servers
from service.settings import ApiKey
from service.tools.errors import SearchQueryError
from service.tools.search import MAX_QUERY_CHARS
from service.tools.untrusted import wrap_untrusted
from service.tracing import TraceParent

from . import descriptions
from .descriptions import RESOURCE_PREFIX
from .rendering import envelope_text

DECLARATION_MIME = "text/typescript"
EXEC_FIELDS = ("code", "title", "session_id", "run_id", "timeout_ms", "max_output_bytes", "language")
WAIT_FIELDS = ("timeout_ms", "tool_results", "approvals")  # besides cell_id
MAX_OUTPUT_BYTES = 10 * 1024 * 1024  # the largest output budget a cell may have (max_output_bytes)
RELAY_SLACK_BYTES = 1024 * 1024  # an envelope's own fields and JSON punctuation

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ToolAnswer:
    """One tool result: ``text`` for the model, ``structured`` for programs, ``is_error`` for failures."""

    text: str
    structured: dict[str, object] | None
    is_error: bool


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    input_schema: JsonObject
    output_schema: JsonObject | None
    read_only: bool
    destructive: bool


@dataclass(frozen=True)
class ResourceDef:
    uri: str
    name: str
    description: str | None
    size: int | None


@dataclass(frozen=True)
class TemplateDef:
    uri_template: str  # RFC 6570
    name: str
    description: str


# The declaration files a key may have besides those resources/list names: one per tool and per MCP
# server, so a client that knows a name reads its file without listing them all.
RESOURCE_TEMPLATES = (
    TemplateDef(
        RESOURCE_PREFIX + "tools/{name}.d.ts",
        "tool declaration",
        "TypeScript declaration of the tool a cell calls as `name` (its callable name, as search_tools gives it)",
    ),
    TemplateDef(
        RESOURCE_PREFIX + "mcp/{server}.d.ts",
        "MCP server declarations",
        "TypeScript declarations of MCP server `server`'s tools, called in a cell as MCP.<server>.<tool>(...)",
    ),
)


class _CellRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cell_id: str = Field(pattern=ID_PATTERN, description="cell id from an envelope")


class _SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="a few words naming the tool or its job")
    limit: int | None = Field(default=None, ge=1, le=1000, description="most hits (clamped to the server's maximum)")


class _SearchOut(BaseModel):
    tools: list[dict[str, object]]


class McpFacade:
    """The tools and resources one service offers over MCP; every method takes the caller's key."""

    def __init__(self, svc: Components) -> None:
        self.svc = svc
        envelope_schema = CellEnvelope.model_json_schema(mode="serialization")
        self._schemas = {
            "exec": _subschema(ExecRequest, EXEC_FIELDS, required=("code",)),
            "wait": _merged(
                _subschema(_CellRef, ("cell_id",), required=("cell_id",)), _subschema(WaitRequest, WAIT_FIELDS)
            ),
            "cancel": _subschema(_CellRef, ("cell_id",), required=("cell_id",)),
            "search_tools": _subschema(_SearchArgs, ("query", "limit"), required=("query",)),
        }
        self._outputs: dict[str, JsonObject | None] = {
            "exec": envelope_schema,
            "wait": envelope_schema,
            "cancel": envelope_schema,
            "search_tools": _SearchOut.model_json_schema(),
        }

    # ---- tools -----------------------------------------------------------------------------------

    def input_schema(self, name: str) -> JsonObject | None:
        return self._schemas.get(name)

    def tools(self, key: ApiKey) -> list[ToolDef]:
        """The four tools; exec's description carries this key's quick index."""
        settings = self.svc.settings
        texts = {
            "exec": descriptions.exec_description(settings, quick_index(self.svc.tools.view_for(key))),
            "wait": descriptions.WAIT_DESCRIPTION,
            "cancel": descriptions.CANCEL_DESCRIPTION,
            "search_tools": descriptions.SEARCH_DESCRIPTION,
        }
        return [
            ToolDef(
                name,
                texts[name],
                self._schemas[name],
                self._outputs[name],
                read_only=name == "search_tools",
                destructive=name == "cancel",
            )
            for name in texts
        ]

    async def call(
        self, key: ApiKey, name: str, arguments: Mapping[str, object] | None, trace_parent: TraceParent = None
    ) -> ToolAnswer:
        """Run one tool for ``key``; refusals and service errors are answers with ``is_error``."""
        args = dict(arguments or {})
        try:
            if name == "exec":
                return await self._exec(key, args, trace_parent)
            if name == "wait":
                return await self._wait(key, args, trace_parent)
            if name == "cancel":
                ref = _validated(_CellRef, args, ("cell_id",))
                relayed = await self._on_holder(key, ref.cell_id, "cancel", {}, trace_parent)
                if relayed is not None:
                    return relayed
                return _envelope_answer(await self.svc.cells.cancel(ref.cell_id, key.tenant, trace_parent))
            if name == "search_tools":
                return await self._search(key, args)
        except ServiceError as exc:
            return _error_answer(exc)
        raise InvalidRequest(
            f"unknown tool {name[:128]!r}: this server has exec, wait, cancel and search_tools", need_param="name"
        )

    async def _exec(self, key: ApiKey, args: dict[str, object], trace_parent: TraceParent) -> ToolAnswer:
        body = _validated(ExecRequest, args, EXEC_FIELDS)
        return _envelope_answer(
            await self.svc.cells.exec(await cell_spec(self.svc.cells, self.svc.tools, key, body), trace_parent)
        )

    async def _wait(self, key: ApiKey, args: dict[str, object], trace_parent: TraceParent) -> ToolAnswer:
        ref = _validated(_CellRef, {k: args[k] for k in ("cell_id",) if k in args}, ("cell_id",))
        body = _validated(WaitRequest, {k: v for k, v in args.items() if k != "cell_id"}, WAIT_FIELDS)
        results, approvals = wait_answers(body)
        relay: dict[str, object] = {"tool_results": results, "approvals": approvals}
        if body.timeout_ms is not None:
            relay["timeout_ms"] = body.timeout_ms
        relayed = await self._on_holder(key, ref.cell_id, "wait", relay, trace_parent)
        if relayed is not None:
            return relayed
        envelope = await self.svc.cells.wait(
            ref.cell_id,
            key.tenant,
            timeout_ms=body.timeout_ms,
            tool_results=results,
            approvals=approvals,
            trace_parent=trace_parent,
        )
        return _envelope_answer(envelope)

    async def _on_holder(
        self, key: ApiKey, cell_id: str, action: str, body: Mapping[str, object], trace_parent: TraceParent
    ) -> ToolAnswer | None:
        """The answer of the replica holding ``cell_id`` when that is another one (None: this one holds it).

        The holder's own HTTP route serves it, as for a relayed HTTP request: it authenticates the key
        and applies its checks (tenant, the one wait at a time).
        """
        replica = self.svc.replica
        holder = held_elsewhere(replica, cell_id)
        if holder is None:
            return None
        settings = self.svc.settings
        # An envelope holds at most the output budget and the pending inputs the inbox allows.
        cap = settings.max_snapshot_bytes + MAX_OUTPUT_BYTES + RELAY_SLACK_BYTES
        headers = self.svc.tracing.headers_for(trace_parent)
        answer = await call_holder(replica, holder, cell_id, action, key.key, jsoncodec.dumps(body), headers, cap)
        try:
            parsed = jsoncodec.loads(answer.body)
        except ValueError:
            parsed = None
        if answer.status == 200 and isinstance(parsed, dict):
            return _envelope_answer(parsed)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if not isinstance(error, dict):
            error = {
                "code": "replica_unavailable",
                "error_type": "transient",
                "message": f"the replica holding cell {cell_id} answered HTTP {answer.status} without an error body; "
                "retry shortly",
            }
        return _refusal(error, answer.retry_after)

    async def _search(self, key: ApiKey, args: dict[str, object]) -> ToolAnswer:
        query = _validated(_SearchArgs, args, ("query", "limit"))
        view = self.svc.tools.view_for(key)
        try:
            native = view.search(query.query, query.limit)
        except SearchQueryError as exc:
            raise InvalidRequest(str(exc), need_param="query") from None
        wanted = view.catalog.limits.clamp(query.limit)
        remote: list[JsonObject] = []
        if len(native) < wanted:
            scope = self.svc.tools.mcp_scope_for(key)
            servers = await listed_servers(scope, self.svc.settings.timeout_ms / 1000)
            remote = search_mcp_tools(servers, query.query, wanted - len(native))
        return ToolAnswer(_search_text(native, remote), {"tools": native + remote}, False)

    # ---- resources -------------------------------------------------------------------------------

    async def resources(self, key: ApiKey) -> list[ResourceDef]:
        """The declaration files this key's cells see, as ``codemode://api/<path>`` resources."""
        table = await self.svc.tools.api_table_for(key)
        return [
            ResourceDef(RESOURCE_PREFIX + f["path"], f["path"], f.get("description"), f.get("bytes"))
            for f in list_api_files(table, None)["files"]
        ]

    def resource_templates(self) -> tuple[TemplateDef, ...]:
        """URI templates of the declaration files (the same for every key; a file outside its policy is 404)."""
        return RESOURCE_TEMPLATES

    async def read_resource(self, key: ApiKey, uri: str) -> str:
        """The text of one declaration file; NotFound for anything else."""
        if not uri.startswith(RESOURCE_PREFIX):
            raise NotFound(
                f"unknown resource {uri[:200]!r}: this server's resources are {RESOURCE_PREFIX}<path> "
                "(list them with resources/list)"
            )
        table = await self.svc.tools.api_table_for(key)
        return str(read_api_file(table, uri[len(RESOURCE_PREFIX) :])["content"])


def _validated(model: type[M], args: dict[str, object], fields: tuple[str, ...]) -> M:
    """``args`` checked by ``model``; only ``fields`` are accepted, errors name the argument."""
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise InvalidRequest(
            f"unknown argument {unknown[0][:64]!r}; this tool takes {', '.join(fields)}", need_param=unknown[0][:64]
        )
    return parsed(model, args)


def _subschema(model: type[BaseModel], fields: tuple[str, ...], required: tuple[str, ...] = ()) -> JsonObject:
    """The JSON schema of ``model`` restricted to ``fields`` (the model stays the one source of the bounds)."""
    full = model.model_json_schema()
    schema: JsonObject = {
        "type": "object",
        "properties": {k: v for k, v in full["properties"].items() if k in fields},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    if "$defs" in full:
        schema["$defs"] = full["$defs"]
    return schema


def _merged(first: JsonObject, second: JsonObject) -> JsonObject:
    """Two object schemas as one: their properties and their ``$defs`` side by side."""
    merged = dict(first)
    merged["properties"] = {**_object(first.get("properties")), **_object(second.get("properties"))}
    defs = {**_object(first.get("$defs")), **_object(second.get("$defs"))}
    if defs:
        merged["$defs"] = defs
    return merged


def _object(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _envelope_answer(envelope: Mapping[str, object]) -> ToolAnswer:
    """A cell envelope as a tool result: its words for the model and, beside them, the envelope itself."""
    try:
        plain = plain_envelope(envelope)
    except jsoncodec.JSONEncodeError as exc:
        raise ResponseNotEncodable(
            f"the cell's envelope could not be written as JSON ({exc}); asking again returns the same answer: "
            "return values nested less deeply (at most 254 levels)"
        ) from None
    return ToolAnswer(envelope_text(plain), plain, plain.get("status") == "failed")


def plain_envelope(envelope: Mapping[str, object]) -> dict[str, object]:
    """``envelope`` as plain JSON data: exactly what ``POST /v1/exec`` would send, decoded.

    The cell registry keeps parts of an envelope encoded (``jsoncodec.fragment``: a pending call's
    input, a background cell's output and value), which only our codec can write; the SDK validates
    and writes results with pydantic.  Going through the bytes HTTP sends decodes every such part,
    wherever it sits, in one pass of the C codec; a final envelope is decoded from the bytes it was
    sealed with.
    """
    encoded = envelope.encoded if isinstance(envelope, SealedEnvelope) else jsoncodec.dumps(envelope)
    plain = jsoncodec.loads(encoded)
    if not isinstance(plain, dict):  # an envelope is an object; anything else is a fault of ours
        raise TypeError(f"a cell envelope encoded as {type(plain).__name__}, not an object")
    return plain


def _error_answer(exc: ServiceError) -> ToolAnswer:
    return _refusal(exc.body()["error"], exc.retry_after)


def _refusal(err: Mapping[str, object], retry_after: int | None) -> ToolAnswer:
    """A refused request in words; its error body is not an envelope, so it has no structuredContent."""
    retry = f" Retry after {retry_after} s." if retry_after is not None else ""
    return ToolAnswer(f"Refused ({err.get('code')}, {err.get('error_type')}): {err.get('message')}{retry}", None, True)


def _search_text(native: Sequence[Mapping[str, object]], remote: Sequence[Mapping[str, object]]) -> str:
    if not native and not remote:
        return "No tool matches; try other words, or read codemode://api/ resources (resources/list)."
    lines = [
        f"- {h['callableName']} {h.get('input', 'unknown')} -> {h.get('output', '?')}: {h.get('description', '')} "
        f"(declaration {RESOURCE_PREFIX}tools/{h['callableName']}.d.ts)"
        for h in native
    ]
    if remote:
        # Remote MCP servers wrote these names and descriptions: data, not instructions.
        mcp = "\n".join(
            f"- {h['callableName']}: {h.get('description', '')} (declaration {RESOURCE_PREFIX}{h['apiPath']})"
            for h in remote
        )
        lines.append(wrap_untrusted(mcp, "mcp"))
    return "\n".join(lines)
