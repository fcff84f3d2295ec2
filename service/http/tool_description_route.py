"""``GET /v1/tool-description``: codemode as one function tool, for the caller's key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from service.handlers.api_files import quick_index
from service.tool_description import LANGUAGES, tool_description

from .request_gate import GatedRoute, api_key_of
from .responses import JSONBytes
from .schemas import ERROR_RESPONSES

tool_description_router = APIRouter(route_class=GatedRoute)

EXAMPLE = {
    "name": "codemode",
    "description": "Run JavaScript in a fresh sandbox (QuickJS). ...\n\n- quote_shipping { ... } -> { ... }",
    "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}


@tool_description_router.get(
    "/v1/tool-description",
    responses={**ERROR_RESPONSES, 200: {"content": {"application/json": {"example": EXAMPLE}}}},
    tags=["tools"],
    summary="Model-facing tool description",
)
async def get_tool_description(
    request: Request,
    language: Annotated[
        str | None, Query(max_length=64, description=f"cell language: {', '.join(LANGUAGES)} (default javascript)")
    ] = None,
) -> JSONBytes:
    """``{name, description, input_schema}`` to register codemode as a function tool with a model provider:
    the guest API in brief, where the limits apply, how to continue with ``wait``, and the quick index of
    the tools this key may call."""
    svc = request.app.state.services
    view = svc.view_for(api_key_of(request))
    return JSONBytes(tool_description(svc.settings, quick_index(view), language))
