"""The MCP facade without the SDK: its four tools and the declaration resources, for one caller's key.

The cell tools (``exec``, ``wait``, ``cancel``) and their approval rounds are ``cell_tools``; this module
adds ``search_tools``, the resources and the tools' declarations.  Arguments are validated with the HTTP
request models themselves (same bounds, same patterns); a bad argument or a service error (capacity,
unknown cell) is a tool result with ``is_error`` and a message naming the cause, which is what a model can
act on.  ``sdk_server`` turns these plain answers into the SDK's types.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from bridge.json_types import JsonObject, JsonValue
from service.api.schemas import CellEnvelope, ExecRequest, WaitRequest
from service.assembly import Components
from service.capabilities.api_files import list_api_files, quick_index, read_api_file
from service.capabilities.mcp import search_mcp_tools
from service.errors import InvalidRequest, NotFound, ServiceError
from service.mcp.scope import listed_servers
from service.settings import ApiKey
from service.tools.errors import SearchQueryError
from service.tools.search import MAX_QUERY_CHARS
from service.tools.untrusted import wrap_untrusted

from . import descriptions
from .cell_tools import EXEC_FIELDS, WAIT_FIELDS, CellRef, CellTools, Outcome, ToolAnswer, refusal, validated
from .descriptions import RESOURCE_PREFIX
from .rounds import Caller, InputNeeded, RoundReply
from .task_calls import TaskCalls

DECLARATION_MIME = "text/typescript"


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


class _SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="a few words naming the tool or its job")
    limit: int | None = Field(default=None, ge=1, le=1000, description="most hits (clamped to the server's maximum)")


class _SearchOut(BaseModel):
    tools: list[dict[str, object]]


class McpFacade:
    """The tools and resources one service offers over MCP; every method takes the caller's key."""

    def __init__(self, svc: Components, started: asyncio.Future[None] | None = None) -> None:
        """``started``: the services' start, when the caller serves before it ends (``codemode mcp`` answers
        ``initialize`` and lists its tools at once; a call waits for the start, or answers its failure)."""
        self.svc = svc
        self._started = started
        self.cells = CellTools(svc)
        self.tasks = TaskCalls(self.cells)
        envelope_schema = CellEnvelope.model_json_schema(mode="serialization")
        wait_schema = _merged(
            _subschema(CellRef, ("cell_id",), required=("cell_id",)), _subschema(WaitRequest, WAIT_FIELDS)
        )
        self._schemas = {
            "exec": _subschema(ExecRequest, EXEC_FIELDS, required=("code",)),
            "wait": wait_schema,
            "cancel": _subschema(CellRef, ("cell_id",), required=("cell_id",)),
            "search_tools": _subschema(_SearchArgs, ("query", "limit"), required=("query",)),
        }
        # What a key that may not answer approvals is offered: wait without the approvals argument.
        self._person_wait = _without(wait_schema, "approvals")
        self._outputs: dict[str, JsonObject | None] = {
            "exec": envelope_schema,
            "wait": envelope_schema,
            "cancel": envelope_schema,
            "search_tools": _SearchOut.model_json_schema(),
        }

    # ---- tools -----------------------------------------------------------------------------------

    def input_schema(self, name: str) -> JsonObject | None:
        """A tool's widest input schema, whoever calls (for checks made before the caller is known)."""
        return self._schemas.get(name)

    def tools(self, key: ApiKey) -> list[ToolDef]:
        """The four tools, in this order; exec's description carries this key's quick index, and wait takes
        approvals only from a key whose model may answer them."""
        settings = self.svc.settings
        model_approves = self.cells.model_approves(key)
        texts = {
            "exec": descriptions.exec_description(settings, quick_index(self.svc.tools.view_for(key))),
            "wait": descriptions.wait_description(model_approves),
            "cancel": descriptions.CANCEL_DESCRIPTION,
            "search_tools": descriptions.SEARCH_DESCRIPTION,
        }
        schemas = {**self._schemas, "wait": self._schemas["wait"] if model_approves else self._person_wait}
        return [
            ToolDef(
                name,
                texts[name],
                schemas[name],
                self._outputs[name],
                read_only=name == "search_tools",
                destructive=name == "cancel",
            )
            for name in texts
        ]

    async def call(
        self, caller: Caller, name: str, arguments: Mapping[str, object] | None, reply: RoundReply | None = None
    ) -> Outcome:
        """Run one tool for the caller (``reply``: a retry answering an approval round); refusals and service
        errors are answers with ``is_error``."""
        args = dict(arguments or {})
        try:
            await self._ready()
            if reply is not None:
                return await self.cells.answered(caller, name, args, reply)
            if name == "exec":
                return await self.cells.exec(caller, args)
            if name == "wait":
                return await self.cells.wait(caller, args)
            if name == "cancel":
                return await self.cells.cancel(caller, args)
            if name == "search_tools":
                return await self._search(caller.key, args)
        except ServiceError as exc:
            return refusal(exc.body()["error"], exc.retry_after)
        raise InvalidRequest(
            f"unknown tool {name[:128]!r}: this server has exec, wait, cancel and search_tools", need_param="name"
        )

    async def decided(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, object] | None,
        needed: InputNeeded,
        responses: Mapping[str, object],
    ) -> Outcome:
        """The outcome of a round a person answered on the same connection (2025-11-25 elicitation requests)."""
        try:
            await self._ready()
            return await self.cells.decided(caller, name, dict(arguments or {}), needed, responses)
        except ServiceError as exc:
            return refusal(exc.body()["error"], exc.retry_after)

    async def _search(self, key: ApiKey, args: dict[str, object]) -> ToolAnswer:
        query = validated(_SearchArgs, args, ("query", "limit"))
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

    async def _ready(self) -> None:
        """Wait for the services' start (ServiceError if it failed: the caller hears why)."""
        if self._started is not None:
            await asyncio.shield(self._started)

    # ---- resources -------------------------------------------------------------------------------

    async def resources(self, key: ApiKey) -> list[ResourceDef]:
        """The declaration files this key's cells see, as ``codemode://api/<path>`` resources."""
        await self._ready()
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
        await self._ready()
        if not uri.startswith(RESOURCE_PREFIX):
            raise NotFound(
                f"unknown resource {uri[:200]!r}: this server's resources are {RESOURCE_PREFIX}<path> "
                "(list them with resources/list)"
            )
        table = await self.svc.tools.api_table_for(key)
        return str(read_api_file(table, uri[len(RESOURCE_PREFIX) :])["content"])


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


def _without(schema: JsonObject, field: str) -> JsonObject:
    """``schema`` without the property ``field``."""
    return {**schema, "properties": {k: v for k, v in _object(schema.get("properties")).items() if k != field}}


def _object(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


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
