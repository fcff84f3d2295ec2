"""From a validated exec request to the ``CellSpec`` the registry runs: one recipe for every face.

The HTTP route and the MCP facade's ``exec`` tool both build their cell here, so limits, the key's
tool policy and client tool compilation apply the same way whichever door a caller uses.
"""

from __future__ import annotations

from typing import Any

from service.assembly import Components
from service.cells.spec import CellSpec
from service.http.schemas import ClientToolDecl, ExecRequest
from service.settings import ApiKey


async def cell_spec(svc: Components, key: ApiKey, body: ExecRequest) -> CellSpec:
    """The cell ``body`` asks for, run as ``key``'s tenant under its tool policy (422s name the field)."""
    limits = svc.cells.limits(
        timeout_ms=body.timeout_ms,
        memory_limit_bytes=body.memory_limit_bytes,
        max_output_bytes=body.max_output_bytes,
    )
    return CellSpec(
        code=body.code,
        tenant=key.tenant,
        limits=limits,
        title=body.title,
        session_id=body.session_id,
        run_id=body.run_id,
        restart_safe=body.restart_safe,
        headless=body.headless,
        background=body.background,
        client_tools=await svc.access.client_tools([_declaration(t) for t in body.client_tools]),
        tool_policy=svc.tool_policy_for(key),
        require_approval=tuple(body.require_approval),
        language=body.language,
    )


def _declaration(tool: ClientToolDecl) -> dict[str, Any]:
    # Not model_dump(): it would copy the schema, however large, on the event loop before its caps apply.
    fields = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    return {k: v for k, v in fields.items() if v is not None}
