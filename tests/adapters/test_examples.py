"""The three framework examples in examples/ build agents that work: each framework's test model writes a cell
calling the example's two tools, and the cell's value comes back to the model."""

from __future__ import annotations

import json

import pytest

from examples import langchain_agent, openai_agents_agent, pydantic_ai_agent
from tests.adapters.conftest import API_KEY
from tests.adapters.test_langchain import scripted as langchain_model
from tests.adapters.test_openai_agents import scripted as agents_model
from tests.adapters.test_openai_agents import tool_output
from tests.adapters.test_pydantic_ai import scripted as pydantic_ai_model

pytestmark = pytest.mark.slow

CELL = """
const order = await lookup_order({order_id: "A-17"});
return {destination: order.destination, tier: await customer_tier({customer: order.customer})};
"""
VALUE = {"destination": "FR", "tier": "gold"}


def test_the_pydantic_ai_example(base_url):
    """examples/pydantic_ai_agent.py: the cell's value is the model's final answer."""
    agent = pydantic_ai_agent.build_agent(base_url, pydantic_ai_model(CELL, {}), API_KEY)
    assert json.loads(agent.run_sync("ship A-17").output)["value"] == VALUE


def test_the_langchain_example(base_url):
    """examples/langchain_agent.py: the tool message the model receives holds the cell's value."""
    model = langchain_model(CELL)
    model.received.clear()
    state = langchain_agent.build_agent(base_url, model, API_KEY).invoke({"messages": [("user", "ship A-17")]})
    assert json.loads(state["messages"][-2].content)["value"] == VALUE


def test_the_openai_agents_example(base_url):
    """examples/openai_agents_agent.py: the model's next input holds the cell's value."""
    model = agents_model(CELL)
    openai_agents_runner = openai_agents_agent.Runner
    openai_agents_runner.run_sync(openai_agents_agent.build_agent(base_url, model, API_KEY), "ship A-17")
    assert tool_output(model)["value"] == VALUE
