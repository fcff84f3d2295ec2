"""A pydantic-ai agent whose two tools run inside codemode cells (docs/guide/adapters.md).

    codemode serve --demo
    CODEMODE_URL=http://127.0.0.1:8000 MODEL=openai:gpt-4o-mini python -m examples.pydantic_ai_agent "Ship order A-17"

The model gets one tool, ``codemode``; it writes a cell that calls ``lookup_order`` and ``customer_tier``
(run here, by pydantic-ai) beside the server's own tools (``quote_shipping`` with ``--demo``).
Needs ``pip install 'codemode-client[pydantic-ai]'`` and the model provider's API key.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from codemode_client.pydantic_ai_toolset import CodeModeToolset
from pydantic_ai import Agent, FunctionToolset


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up: its customer, destination country and weight in kg."""
    return {"order_id": order_id, "customer": "ada", "destination": "FR", "weight_kg": 2.5}


def customer_tier(customer: str) -> str:
    """The customer's tier: "gold" customers ship express."""
    return "gold" if customer == "ada" else "standard"


def build_agent(base_url: str, model: Any, api_key: str | None = None) -> Agent[None, str]:
    """The agent: codemode as its one toolset, the two functions above as the cell's client tools."""
    toolset = CodeModeToolset(base_url, FunctionToolset([lookup_order, customer_tier]), api_key=api_key)
    return Agent(model, toolsets=[toolset], instructions="Answer with one codemode cell when tools are needed.")


if __name__ == "__main__":
    agent = build_agent(
        os.environ.get("CODEMODE_URL", "http://127.0.0.1:8000"),
        os.environ.get("MODEL", "openai:gpt-4o-mini"),
        os.environ.get("CODEMODE_API_KEY"),
    )
    print(agent.run_sync(" ".join(sys.argv[1:]) or "Ship order A-17: what does it cost?").output)
