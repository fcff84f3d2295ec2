"""A plugin for the approval tests: a payment tool that records every run, and a before-hook that
asks for approval of large payments.

In-process tests count runs in ``CALLS["pay"]``; a live server (another process) appends each run's
arguments to the file named by the ``APPROVAL_TEST_LOG`` environment variable.
"""

from __future__ import annotations

import json
import os
from typing import Any

from service.tools import Block, HookCall, NeedsApproval, ToolContext, ToolRegistry
from tests.support.tools import CALLS

PLUGIN_ID = "payments"
LOG_VARIABLE = "APPROVAL_TEST_LOG"
#: Payments above this need a person's approval (the hook's rule).
HOOK_LIMIT = 100


async def _pay(call_id: str, params: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    CALLS["pay"] = CALLS.get("pay", 0) + 1
    path = os.environ.get(LOG_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(params) + "\n")
    return {"paid": params["amount"], "to": params["to"]}


def _before(call: HookCall) -> Any:
    if call.tool_name != "pay":
        return None
    if call.params.get("to") == "nobody":
        return Block("a payment needs a payee")
    if call.params.get("amount", 0) > HOOK_LIMIT:
        return NeedsApproval(f"payments over {HOOK_LIMIT} need a person (this one is {call.params['amount']})")
    if call.params.get("to") == "shorthand":
        return {**call.params, "to": "Shorthand Ltd"}  # rewritten before anyone is asked
    return None


def register(registry: ToolRegistry) -> None:
    registry.add_tool(
        name="pay",
        description="Pay an amount to someone.",
        execute=_pay,
        input_schema={
            "type": "object",
            "required": ["amount", "to"],
            "additionalProperties": False,
            "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
        },
    )
    registry.add_hook(before=_before)
