"""codemode for pydantic-ai: a toolset with one code tool (``pip install 'codemode-client[pydantic-ai]'``).

    from codemode_client.pydantic_ai_toolset import CodeModeToolset
    toolset = CodeModeToolset("http://127.0.0.1:8000", FunctionToolset([get_weather, get_time]))
    agent = Agent(model, toolsets=[toolset])

The model sees one tool, ``codemode``, described by the server (``GET /v1/tool-description``, for the
cells' ``language``: pass ``language="python"`` for Python cells) plus a line per tool of the wrapped
toolset.  A call runs the cell to its end; each call the cell makes to a wrapped tool goes through
pydantic-ai's own ``ToolManager`` (argument validation, hooks and instrumentation, ``requires_approval``),
and its result goes back to the cell.  An approval a wrapped
tool asks for is put to ``approve(name, args)``; without it the call is refused.

This is the only module of ours that imports pydantic-ai.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import TypeAdapter

try:
    from pydantic_ai import AbstractToolset, ApprovalRequired, ModelRetry, RunContext, ToolsetTool, WrapperToolset
    from pydantic_ai.messages import ToolCallPart, ToolReturn
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.tools import ToolDefinition, ToolDenied
except ImportError as exc:  # the framework is an optional extra
    raise ImportError(
        f"codemode_client.pydantic_ai_toolset needs its framework: pip install 'codemode-client[pydantic-ai]' ({exc})"
    ) from exc

from . import adapters
from .async_client import AsyncClient
from .errors import BadRequestError, RunLimitError

#: The model's arguments are checked by ``adapters.exec_arguments`` (and again by the server).
# Typed Any: pydantic may hand back its plugin validator, API-compatible but not the declared protocol.
_ANY_OBJECT: Any = TypeAdapter(dict[str, Any]).validator


class CodeModeToolset(WrapperToolset[Any]):
    """One ``codemode`` tool whose cells call the wrapped toolset's tools as client tools."""

    def __init__(
        self,
        client: AsyncClient | str,
        wrapped: AbstractToolset[Any] | None = None,
        *,
        api_key: str | None = None,
        approve: adapters.Approve | None = None,
        max_retries: int = 1,
        **exec_fields: Any,
    ) -> None:
        from pydantic_ai import FunctionToolset

        super().__init__(wrapped if wrapped is not None else FunctionToolset([]))
        self._client = client
        self._api_key = api_key
        self._approve = approve
        self._max_retries = max_retries
        self._fields = exec_fields  # session_id, run_id, language, ... for every cell
        self._language = adapters.language(exec_fields)
        self._server: dict[str, Any] | None = None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if self._server is None:
            async with self._session() as cm:
                self._server = await cm.tool_description(self._language)
        tools = [_framework_tool(t.tool_def) for t in (await self.wrapped.get_tools(ctx)).values()]
        tool_def = ToolDefinition(
            name=adapters.TOOL_NAME,
            description=adapters.description(self._server, tools, self._language),
            parameters_json_schema=adapters.input_schema(self._server),
        )
        return {
            adapters.TOOL_NAME: ToolsetTool(
                toolset=self, tool_def=tool_def, max_retries=self._max_retries, args_validator=_ANY_OBJECT
            )
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        try:
            code, fields = adapters.exec_arguments(tool_args, self._language)
        except ValueError as exc:
            raise ModelRetry(str(exc)) from None
        manager = await ToolManager(toolset=self.wrapped).for_run_step(ctx)
        inner = await self.wrapped.get_tools(ctx)
        client_tools = [
            (_framework_tool(t.tool_def).declaration(), self._handler(manager, n)) for n, t in inner.items()
        ]
        async with self._session() as cm:
            try:
                env = await cm.run(code, client_tools=client_tools, **{**self._fields, **fields})
            except BadRequestError as exc:  # the service refused the request: the model can change it
                raise ModelRetry(f"codemode refused the cell: {exc.message}") from None
            except RunLimitError as exc:  # a cell that never ends: the model can change its code
                raise ModelRetry(adapters.stopped(exc)) from None
        if env.status == "failed" and env.failure_phase == "input":  # refused before it ran: rewrite it
            raise ModelRetry(f"codemode refused the cell before running it ({env.code}): {env.error}")
        return adapters.answer(env)

    def _session(self) -> AbstractAsyncContextManager[AsyncClient]:
        """The client for one call: the caller's own (left open), or a new one for the URL (each agent run
        may have its own event loop, and an HTTP connection belongs to the loop that opened it)."""
        if isinstance(self._client, AsyncClient):
            return contextlib.nullcontext(self._client)
        return AsyncClient(self._client, self._api_key)

    def _handler(self, manager: ToolManager[Any], name: str) -> Callable[[Any], Awaitable[Any]]:
        async def handle(args: Any) -> Any:
            part = ToolCallPart(tool_name=name, args=args, tool_call_id=f"codemode-{uuid.uuid4().hex[:12]}")
            try:
                result = await manager.handle_call(part, wrap_validation_errors=False)
            except ApprovalRequired:
                if not await adapters.approved(self._approve, name, args):
                    raise PermissionError(f"{name} requires approval and it was not given") from None
                result = await manager.handle_call(part, approved=True, wrap_validation_errors=False)
            if isinstance(result, ToolDenied):
                raise PermissionError(f"{name} was denied: {result.message}")
            if isinstance(result, ToolReturn):
                result = result.return_value
            return adapters.jsonable(result)

        return handle


def _framework_tool(tool_def: ToolDefinition) -> adapters.FrameworkTool:
    return adapters.FrameworkTool(tool_def.name, tool_def.description or "", tool_def.parameters_json_schema)
