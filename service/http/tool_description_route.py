"""``GET /v1/tool-description``: codemode as one function tool, for the caller's key."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from starlette.responses import Response

from bridge import jsoncodec
from service.api.keyed_tools import KeyedTools
from service.api.schemas import ERROR_RESPONSES
from service.capabilities.api_files import quick_index
from service.settings import Settings
from service.tool_description import LANGUAGES, check_language, tool_description

from .request_gate import api_key_of
from .route_group import RouteGroup, example, route

EXAMPLE = {
    "name": "codemode",
    "description": "Run JavaScript in a fresh sandbox (QuickJS). ...\n\n- quote_shipping { ... } -> { ... }",
    "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}


class ToolDescriptionRoutes(RouteGroup):
    """codemode described as one function tool, per key and cell language (built once each)."""

    def __init__(self, settings: Settings, tools: KeyedTools) -> None:
        self.settings = settings
        self.tools = tools
        # A key's catalog is fixed for the process's life (plugins load at start, policies are settings), so
        # its answer is built once: the quick index of a large catalog costs milliseconds of the event loop.
        # Keys are settings too, so this holds at most (configured keys + 1) x languages answers.
        self._answers: dict[tuple[str, str], bytes] = {}

    @route(
        "GET",
        "/v1/tool-description",
        responses={**ERROR_RESPONSES, 200: example(EXAMPLE)},
        tags=("tools",),
        summary="Model-facing tool description",
        operation_id="get_tool_description",
    )
    async def get_tool_description(
        self,
        request: Request,
        language: Annotated[
            str | None,
            Query(max_length=64, description=f"cell language: {', '.join(LANGUAGES)} (default javascript)"),
        ] = None,
    ) -> Response:
        """``{name, description, input_schema}`` to register codemode as a function tool with a model provider:
        the guest API in brief, where the limits apply, how to continue with ``wait``, and the quick index of
        the tools this key may call."""
        key = api_key_of(request)
        lang = check_language(language)
        body = self._answers.get((key.key, lang))
        if body is None:
            description = tool_description(self.settings, quick_index(self.tools.view_for(key)), lang)
            body = self._answers[(key.key, lang)] = jsoncodec.dumps(description)
        return Response(body, media_type="application/json")
