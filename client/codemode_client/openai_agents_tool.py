"""codemode for the OpenAI Agents SDK: one function tool (``pip install 'codemode-client[openai-agents]'``).

    from codemode_client.openai_agents_tool import codemode_tool
    tool = codemode_tool("http://127.0.0.1:8000", tools=[get_weather, get_time])
    agent = Agent(name="assistant", tools=[tool])

The model sees one function tool, ``codemode``, described by the server (``GET /v1/tool-description``)
plus a line per function tool given.  A call runs the cell to its end; each call the cell makes to one
of those tools runs the tool's own ``on_invoke_tool`` (the SDK's argument validation and failure
policy) inside a function span of the current trace, after its ``needs_approval`` policy, which is
put to ``approve(name, args)`` (no approver: the call is refused).  A tool whose failure policy turns
errors into text (the SDK's default) answers the cell with that text; with
``failure_error_function=None`` its failures reject the cell's call instead.

This is the only module of ours that imports the Agents SDK.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext
    from agents.tracing import function_span
except ImportError as exc:  # the framework is an optional extra
    raise ImportError(
        f"codemode_client.openai_agents_tool needs its framework: pip install 'codemode-client[openai-agents]' ({exc})"
    ) from exc

from . import adapters
from .async_client import AsyncClient
from .client import Client
from .errors import BadRequestError, RunLimitError


def codemode_tool(
    base_url: str,
    tools: Sequence[FunctionTool] = (),
    *,
    api_key: str | None = None,
    approve: adapters.Approve | None = None,
    **exec_fields: Any,
) -> FunctionTool:
    """The code tool for the server at ``base_url``, whose cells call ``tools`` (``@function_tool`` tools).

    Its description is fetched once, now, from ``GET /v1/tool-description`` (for ``api_key``'s tools and the
    cells' ``language``, an exec field: ``language="python"`` for Python cells).
    """
    language = adapters.language(exec_fields)
    with Client(base_url, api_key) as client:
        server = client.tool_description(language)
    framework = [adapters.FrameworkTool(t.name, t.description, t.params_json_schema) for t in tools]

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        try:
            code, fields = adapters.exec_arguments(json.loads(arguments or "{}"), language)
        except ValueError as exc:  # json.JSONDecodeError is one
            return json.dumps({"status": "refused", "error": str(exc)})
        client_tools = [(f.declaration(), _handler(ctx, t, approve)) for f, t in zip(framework, tools)]
        async with AsyncClient(base_url, api_key) as cm:
            try:
                env = await cm.run(code, client_tools=client_tools, **{**exec_fields, **fields})
            except BadRequestError as exc:  # the service refused the request: the model can change it
                return json.dumps({"status": "refused", "error": exc.message})
            except RunLimitError as exc:  # a cell that never ends: the model can change its code
                return json.dumps({"status": "stopped", "code": exc.code, "error": adapters.stopped(exc)})
        return json.dumps(adapters.answer(env), ensure_ascii=False)

    return FunctionTool(
        name=adapters.TOOL_NAME,
        description=adapters.description(server, framework, language),
        params_json_schema=adapters.input_schema(server),
        on_invoke_tool=invoke,
        strict_json_schema=False,  # the server's schema has optional fields
    )


def _handler(
    ctx: ToolContext[Any], tool: FunctionTool, approve: adapters.Approve | None
) -> Callable[[Any], Awaitable[Any]]:
    async def handle(args: Any) -> Any:
        arguments = json.dumps(args, ensure_ascii=False)
        call_id = f"codemode-{uuid.uuid4().hex[:12]}"
        if await _needs_approval(tool, ctx, args, call_id) and not await adapters.approved(approve, tool.name, args):
            raise PermissionError(f"{tool.name} needs approval and it was not given")
        nested = ToolContext(
            context=ctx.context,
            usage=ctx.usage,
            tool_name=tool.name,
            tool_call_id=call_id,
            tool_arguments=arguments,
            agent=ctx.agent,
            run_config=ctx.run_config,
        )
        with function_span(tool.name, input=arguments) as span:
            result = await tool.on_invoke_tool(nested, arguments)
            span.span_data.output = str(result)[:4096]
        return adapters.jsonable(result)

    return handle


async def _needs_approval(tool: FunctionTool, ctx: RunContextWrapper[Any], args: Any, call_id: str) -> bool:
    policy = tool.needs_approval
    if isinstance(policy, bool):
        return policy
    return bool(await policy(ctx, args if isinstance(args, dict) else {}, call_id))


__all__ = ["codemode_tool"]
