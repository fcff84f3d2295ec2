"""codemode for LangChain and LangGraph: one code tool (``pip install 'codemode-client[langchain]'``).

    from codemode_client.langchain_tool import codemode_tool
    tool = codemode_tool("http://127.0.0.1:8000", tools=[get_weather, get_time])
    agent = create_agent(model, [tool])        # langchain.agents.create_agent

The model sees one tool, ``codemode``, described by the server (``GET /v1/tool-description``) plus a
line per LangChain tool given.  A call runs the cell to its end; each call the cell makes to one of
those tools is ``tool.invoke``/``ainvoke`` with the code tool's child callbacks, so LangChain's own
argument validation, error handling and callbacks (tracing: LangSmith, Langfuse, ...) apply, nested
under the code tool's run.

This is the only module of ours that imports LangChain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
    from langchain_core.tools import BaseTool, ToolException
    from pydantic import ConfigDict, Field
except ImportError as exc:  # the framework is an optional extra
    raise ImportError(
        f"codemode_client.langchain_tool needs its framework: pip install 'codemode-client[langchain]' ({exc})"
    ) from exc

from . import adapters
from .async_client import AsyncClient
from .client import Client
from .errors import BadRequestError, RunLimitError


class CodeModeTool(BaseTool):
    """The ``codemode`` tool: runs a cell whose calls to ``tools`` go through LangChain's tool execution."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = adapters.TOOL_NAME
    description: str = ""
    tools: list[BaseTool] = Field(default_factory=list)
    base_url: str
    api_key: str | None = None
    exec_fields: dict[str, Any] = Field(default_factory=dict)  # session_id, run_id, ... for every cell

    def _declarations(self, call: Callable[[BaseTool], Any]) -> list[tuple[dict[str, Any], Any]]:
        return [(_framework_tool(t).declaration(), call(t)) for t in self.tools]

    def _run(self, run_manager: CallbackManagerForToolRun | None = None, **args: Any) -> dict[str, Any]:
        code, fields = _arguments(args, self.exec_fields)
        callbacks = run_manager.get_child() if run_manager is not None else None

        def call(tool: BaseTool) -> Callable[[Any], Any]:
            return lambda tool_args: adapters.jsonable(tool.invoke(tool_args, config={"callbacks": callbacks}))

        with Client(self.base_url, self.api_key) as client:
            try:
                env = client.run(code, client_tools=self._declarations(call), **{**self.exec_fields, **fields})
            except BadRequestError as exc:
                raise ToolException(f"codemode refused the cell: {exc.message}") from None
            except RunLimitError as exc:  # a cell that never ends: the model can change its code
                raise ToolException(adapters.stopped(exc)) from None
        return adapters.answer(env)

    async def _arun(self, run_manager: AsyncCallbackManagerForToolRun | None = None, **args: Any) -> dict[str, Any]:
        code, fields = _arguments(args, self.exec_fields)
        callbacks = run_manager.get_child() if run_manager is not None else None

        def call(tool: BaseTool) -> Callable[[Any], Awaitable[Any]]:
            async def invoke(tool_args: Any) -> Any:
                return adapters.jsonable(await tool.ainvoke(tool_args, config={"callbacks": callbacks}))

            return invoke

        async with AsyncClient(self.base_url, self.api_key) as client:
            try:
                env = await client.run(code, client_tools=self._declarations(call), **{**self.exec_fields, **fields})
            except BadRequestError as exc:
                raise ToolException(f"codemode refused the cell: {exc.message}") from None
            except RunLimitError as exc:  # a cell that never ends: the model can change its code
                raise ToolException(adapters.stopped(exc)) from None
        return adapters.answer(env)


def codemode_tool(
    base_url: str,
    tools: Sequence[BaseTool | Callable[..., Any]] = (),
    *,
    api_key: str | None = None,
    **exec_fields: Any,
) -> CodeModeTool:
    """The code tool for the server at ``base_url``; plain functions in ``tools`` become LangChain tools.

    Its description is fetched once, now, from ``GET /v1/tool-description`` (for ``api_key``'s tools and the
    cells' ``language``, an exec field: ``language="python"`` for Python cells).
    """
    from langchain_core.tools import tool as as_tool

    wrapped = [t if isinstance(t, BaseTool) else as_tool(t) for t in tools]
    language = adapters.language(exec_fields)
    with Client(base_url, api_key) as client:
        server = client.tool_description(language)
    return CodeModeTool(
        description=adapters.description(server, [_framework_tool(t) for t in wrapped], language),
        args_schema=adapters.input_schema(server),
        tools=wrapped,
        base_url=base_url,
        api_key=api_key,
        exec_fields=exec_fields,
        handle_tool_error=True,  # a refused cell is an answer the model can act on
    )


def _arguments(args: dict[str, Any], exec_fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    try:
        return adapters.exec_arguments(args, adapters.language(exec_fields))
    except ValueError as exc:
        raise ToolException(str(exc)) from None


def _framework_tool(tool: BaseTool) -> adapters.FrameworkTool:
    schema = tool.tool_call_schema  # a JSON schema dict, or a pydantic (v2 or v1) model
    as_json = schema if isinstance(schema, dict) else getattr(schema, "model_json_schema", schema.schema)()
    return adapters.FrameworkTool(tool.name, tool.description or "", as_json)


__all__ = ["CodeModeTool", "codemode_tool"]
