"""One real `codemode serve` (with an API key) for the framework adapter tests, and the framework tools they share.

The two framework tools are plain Python functions each framework wraps its own way; ``CALLS`` records
every run, so a test sees that the framework (not codemode) executed them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live_server import codemode_serve

API_KEY = "ck_test_adapters_0123456789"
#: A key of another tenant whose policy denies one of the service's own tools (tests/adapters/test_fastmcp.py).
NARROW_KEY = "ck_test_adapters_narrow_0123456789"
CONFIG = f"""
[tools]
plugins = ["service.demo.shipping"]

[[api_keys]]
key = "{API_KEY}"
tenant = "adapters"

[[api_keys]]
key = "{NARROW_KEY}"
tenant = "adapters-narrow"
tools = {{deny = ["quote_shipping", "client:refund_order"]}}
"""
CALLS: list[tuple[str, dict[str, Any]]] = []

#: The cell the scripted models write: it calls both framework tools and returns what the model needs.
CELL = """
const order = await lookup_order({order_id: "A-17"});
const rate = await shipping_rate({country: order.destination, weight_kg: order.weight_kg});
let refused = null;
try { await shipping_rate({country: "FR", weight_kg: "heavy"}); } catch (e) { refused = e.message; }
text(`order ${order.order_id} to ${order.destination}`);
return {order: order.order_id, price: rate.price, refused};
"""

#: The same cell in Python, as a model writes it from the Python description.
PY_CELL = """
order = await lookup_order(order_id="A-17")
rate = await shipping_rate(country=order["destination"], weight_kg=order["weight_kg"])
refused = None
try:
    await shipping_rate(country="FR", weight_kg="heavy")
except Exception as e:
    refused = str(e)
text(f"order {order['order_id']} to {order['destination']}")
{"order": order["order_id"], "price": rate["price"], "refused": refused}
"""
CELLS = {"javascript": CELL, "python": PY_CELL}


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up: its destination country and weight."""
    CALLS.append(("lookup_order", {"order_id": order_id}))
    return {"order_id": order_id, "destination": "FR", "weight_kg": 2.5}


def shipping_rate(country: str, weight_kg: float) -> dict[str, Any]:
    """Price of shipping a parcel of weight_kg to a country."""
    CALLS.append(("shipping_rate", {"country": country, "weight_kg": weight_kg}))
    return {"country": country, "price": round(4 + 2 * weight_kg, 2)}


def check_outcome(answer: dict[str, Any]) -> None:
    """What the cell returns: both tools ran through the framework, and its validation refused the bad call."""
    assert answer["status"] == "completed", answer
    assert answer["value"]["order"] == "A-17" and answer["value"]["price"] == 9.0
    assert "weight_kg" in answer["value"]["refused"], answer  # the framework's validation error, caught in the cell
    assert answer["output"] == ["order A-17 to FR"]
    assert CALLS == [
        ("lookup_order", {"order_id": "A-17"}),
        ("shipping_rate", {"country": "FR", "weight_kg": 2.5}),
    ], CALLS


@pytest.fixture(scope="package")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("adapters-svc"), config=CONFIG) as base:
        yield base


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()
