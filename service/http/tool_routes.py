"""``/v1/catalog`` and ``/v1/api/files``: the tools a key may call and their declaration files."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from service.api.keyed_tools import KeyedTools
from service.api.schemas import ERROR_RESPONSES, SESSION_PATTERN, ApiFile, ApiFileList, CatalogAnswer
from service.capabilities.api_files import list_api_files, quick_index, read_api_file

from .request_gate import CallerDep
from .responses import JSONBytes
from .route_group import RouteGroup, example, route

# The API contract names the parameter; what a tool shows depends on the key, not on a session (a run's
# blocked tools are in GET /v1/sessions/{id}/runs/{run}).
CatalogSession = Annotated[
    str | None,
    Query(pattern=SESSION_PATTERN, description="accepted and checked; the catalog is the same for every session"),
]
# Declaration files are one or two segments deep (results.d.ts, tools/<name>.d.ts, mcp/<server>.d.ts):
# one route each, so every URL the docs give is an operation of the OpenAPI document.
ApiDir = Annotated[str, Path(description="the file's folder: tools or mcp")]
ApiName = Annotated[str, Path(description="the file's name, e.g. results.d.ts or echo.d.ts")]

# OpenAPI examples of the answers besides the response models' own.
CATALOG_EXAMPLE = {
    "tools": [
        {
            "callableName": "quote_shipping",
            "toolName": "quote_shipping",
            "description": "Price a parcel",
            "source": "plugin",
            "input": "{ destination: string; origin: string; weight_kg: number }",
        }
    ],
    "quick_index": "- quote_shipping { ... } -> ?",
}
API_LIST_EXAMPLE = {
    "files": [
        {"path": "results.d.ts", "description": "Saved results", "bytes": 2474},
        {"path": "tools/echo.d.ts", "description": "echo: Echo x back"},
    ]
}
API_READ_EXAMPLE = {
    "path": "tools/echo.d.ts",
    "description": "echo: Echo x back",
    "content": "declare function echo(input?: { x?: unknown }): Promise<unknown>;",
    "bytes": 66,
}


class ToolRoutes(RouteGroup):
    """What a key's guests see of the tools: the catalog and ``API.list``/``API.read``."""

    def __init__(self, tools: KeyedTools) -> None:
        self.tools = tools

    @route(
        "GET",
        "/v1/catalog",
        response_model=CatalogAnswer,
        responses={**ERROR_RESPONSES, 200: example(CATALOG_EXAMPLE)},
        tags=("tools",),
        summary="Tool catalog and quick index",
        operation_id="get_catalog",
    )
    async def catalog(self, key: CallerDep, session_id: CatalogSession = None) -> JSONBytes:
        """Handle metadata of every tool visible to this key, and the quick index for agent prompts.

        The catalog is the key's (its tool policy decides it), the same for every session: ``session_id``
        is checked and accepted, and changes nothing.
        """
        view = self.tools.view_for(key)
        return JSONBytes({"tools": view.handles(), "quick_index": quick_index(view)})

    @route(
        "GET",
        "/v1/api/files",
        response_model=ApiFileList,
        responses={**ERROR_RESPONSES, 200: example(API_LIST_EXAMPLE)},
        tags=("tools",),
        summary="List declaration files",
        operation_id="list_api_files",
    )
    async def api_files(self, key: CallerDep, prefix: str | None = None) -> JSONBytes:
        """What ``API.list(prefix)`` returns in a guest of this key."""
        return JSONBytes(list_api_files(await self.tools.api_table_for(key), prefix))

    @route(
        "GET",
        "/v1/api/files/{name}",
        response_model=ApiFile,
        responses={**ERROR_RESPONSES, 200: example({**API_READ_EXAMPLE, "path": "results.d.ts"})},
        tags=("tools",),
        summary="Read a top-level declaration file",
        operation_id="get_api_file",
    )
    async def api_file(self, name: ApiName, key: CallerDep) -> JSONBytes:
        """What ``API.read(name)`` returns in a guest of this key (``results.d.ts``)."""
        return JSONBytes(read_api_file(await self.tools.api_table_for(key), name))

    @route(
        "GET",
        "/v1/api/files/{dir}/{name}",
        response_model=ApiFile,
        responses={**ERROR_RESPONSES, 200: example(API_READ_EXAMPLE)},
        tags=("tools",),
        summary="Read a declaration file in a folder",
        operation_id="get_nested_api_file",
    )
    async def api_nested_file(self, dir: ApiDir, name: ApiName, key: CallerDep) -> JSONBytes:
        """What ``API.read("<dir>/<name>")`` returns in a guest of this key (``tools/echo.d.ts``, ``mcp/time.d.ts``)."""
        return JSONBytes(read_api_file(await self.tools.api_table_for(key), f"{dir}/{name}"))

    # Every other depth or spelling (an empty segment, a dot segment, three segments) names no file: this
    # undocumented fallback answers it like API.read does (422 invalid path, 404 unknown file), as before.
    # Defined last: routes match in the order the class defines them.
    @route("GET", "/v1/api/files/{path:path}", include_in_schema=False)
    async def api_file_any_path(self, path: str, key: CallerDep) -> JSONBytes:
        return JSONBytes(read_api_file(await self.tools.api_table_for(key), path))
