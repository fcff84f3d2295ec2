"""``GET /v1/tool-description``: codemode as one function tool, for the caller's key."""

from __future__ import annotations

import weakref
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from bridge import jsoncodec
from service.api.schemas import ERROR_RESPONSES
from service.handlers.api_files import quick_index
from service.tool_description import LANGUAGES, check_language, tool_description

from .request_gate import GatedRoute, api_key_of

tool_description_router = APIRouter(route_class=GatedRoute)
#: Per app: the encoded answer for each (API key, language).
_ANSWERS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], bytes]] = weakref.WeakKeyDictionary()

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
) -> Response:
    """``{name, description, input_schema}`` to register codemode as a function tool with a model provider:
    the guest API in brief, where the limits apply, how to continue with ``wait``, and the quick index of
    the tools this key may call."""
    svc = request.app.state.services
    key = api_key_of(request)
    lang = check_language(language)
    # A key's catalog is fixed for the process's life (plugins load at start, policies are settings), so
    # its answer is built once: the quick index of a large catalog costs milliseconds of the event loop.
    # Keys are settings too, so the cache holds at most (configured keys + 1) x languages answers.
    cache = _ANSWERS.setdefault(request.app, {})
    body = cache.get((key.key, lang))
    if body is None:
        body = jsoncodec.dumps(tool_description(svc.settings, quick_index(svc.view_for(key)), lang))
        cache[(key.key, lang)] = body
    return Response(body, media_type="application/json")
