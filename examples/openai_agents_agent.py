"""An OpenAI Agents SDK agent whose two tools run inside codemode cells (docs/guide/adapters.md).

    codemode serve --demo
    CODEMODE_URL=http://127.0.0.1:8000 python -m examples.openai_agents_agent "Ship order A-17"

The model gets one tool, ``codemode``; it writes a cell that calls ``lookup_order`` and ``customer_tier``
(run here, by the SDK) beside the server's own tools (``quote_shipping`` with ``--demo``).
Needs ``pip install 'codemode-client[openai-agents]'`` and ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from agents import Agent, Runner, function_tool
from codemode_client.openai_agents_tool import codemode_tool


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up: its customer, destination country and weight in kg."""
    return {"order_id": order_id, "customer": "ada", "destination": "FR", "weight_kg": 2.5}


@function_tool
def customer_tier(customer: str) -> str:
    """The customer's tier: "gold" customers ship express."""
    return "gold" if customer == "ada" else "standard"


def build_agent(base_url: str, model: Any = None, api_key: str | None = None) -> Agent[Any]:
    """The agent: codemode as its one tool, the two tools above as the cell's client tools."""
    tool = codemode_tool(base_url, [lookup_order, customer_tier], api_key=api_key)
    return Agent(
        name="shipper", instructions="Answer with one codemode cell when tools are needed.", model=model, tools=[tool]
    )


if __name__ == "__main__":
    agent = build_agent(
        os.environ.get("CODEMODE_URL", "http://127.0.0.1:8000"), api_key=os.environ.get("CODEMODE_API_KEY")
    )
    print(Runner.run_sync(agent, " ".join(sys.argv[1:]) or "Ship order A-17: what does it cost?").final_output)
