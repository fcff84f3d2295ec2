"""pydantic-ai CodeMode (pydantic-ai-harness) whose code runs in codemode (docs/guide/pydantic-ai-codemode.md).

    codemode serve
    MONTY_URL=ws://127.0.0.1:8000/v1/monty MODEL=openai:gpt-4o-mini python -m examples.pydantic_ai_codemode

The model gets CodeMode's ``run_code`` tool; the code it writes runs in a confined Monty worker of
codemode, and each tool it calls (``lookup_order``, ``shipping_rate``) runs here, in pydantic-ai.
Needs ``pip install pydantic-ai-harness pydantic-monty==1.4.0`` and the model provider's API key.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pydantic_monty
from pydantic_ai import Agent
from pydantic_ai_harness import CodeMode


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up: its destination country and weight in kg."""
    return {"order_id": order_id, "destination": "FR", "weight_kg": 2.5}


def shipping_rate(country: str, weight_kg: float) -> dict[str, Any]:
    """Price of shipping a parcel of weight_kg to a country."""
    return {"country": country, "price": round(4 + 2 * weight_kg, 2)}


def build_agent(url: str, api_key: str | None, model: Any) -> Agent[None, str]:
    """The agent: CodeMode's sandbox is codemode's /v1/monty, the key sent with each connection."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}

    def sandbox() -> pydantic_monty.AsyncMontyWebsocket:
        return pydantic_monty.AsyncMontyWebsocket(url, connect_headers=lambda: headers)

    return Agent(model, tools=[lookup_order, shipping_rate], capabilities=[CodeMode(monty_sandbox=sandbox)])


if __name__ == "__main__":
    agent = build_agent(
        os.environ.get("MONTY_URL", "ws://127.0.0.1:8000/v1/monty"),
        os.environ.get("CODEMODE_API_KEY"),
        os.environ.get("MODEL", "openai:gpt-4o-mini"),
    )
    print(agent.run_sync(" ".join(sys.argv[1:]) or "Ship order A-17: what does it cost?").output)
