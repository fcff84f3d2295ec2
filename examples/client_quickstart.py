"""The Python client in two loops (docs/guide/python-client.md): ``run()`` with a client tool and an approver,
and a background cell followed on its event stream.

    CODEMODE_URL=http://127.0.0.1:8000 python -m examples.client_quickstart

Needs a service with the shipping example plugin (``plugins = ["service.demo.shipping"]``).
"""

from __future__ import annotations

import os
from typing import Any

from codemode_client import Client, EnvelopeEvent, OutputEvent, PendingCall, PendingEvent


def lookup_order(params: dict[str, Any]) -> dict[str, Any]:
    """Look an order up by {order_id}; returns its destination country and weight."""
    return {"order_id": params["order_id"], "destination": "FR", "weight_kg": 2.5}


def approve(call: PendingCall) -> tuple[bool, str]:
    """A rule standing in for a person: parcels up to 20 kg may be quoted."""
    weight = (call.input or {}).get("weight_kg", 0)
    return weight <= 20, f"{weight} kg is over the 20 kg a quote may be made for without a person"


QUOTE_ORDER = """
const order = await lookup_order({order_id: "A-17"});
const quote = await quote_shipping({origin: "DE", destination: order.destination, weight_kg: order.weight_kg});
text(`quoted ${order.order_id}`);
return {order: order.order_id, price: quote.price, currency: quote.currency};
"""


def quote_order(cm: Client) -> Any:
    """One call runs the cell to its end: lookup_order runs here, quote_shipping only once approved."""
    env = cm.run(
        QUOTE_ORDER, client_tools={"lookup_order": lookup_order}, approve=approve, require_approval=["quote_shipping"]
    )
    if env.status != "completed":
        raise RuntimeError(f"{env.code}: {env.error}")
    print(env.text, env.value)
    return env.value


WATCHED = """
for (const step of ["fetching", "pricing"]) {
  text(step);
  await new Promise(r => setTimeout(r, 200));
}
const quote = await quote_shipping({origin: "DE", destination: "US", weight_kg: 4});
return quote.price;
"""


def watch_cell(cm: Client) -> Any:
    """Start a cell in the background and do nothing until an event comes: print output as it happens,
    answer approvals when asked, stop at the envelope."""
    cell = cm.exec(WATCHED, background=True, require_approval=["quote_shipping"])
    for event in cm.events(cell.cell_id):
        if isinstance(event, OutputEvent):
            print("output:", event.entry.text)
        elif isinstance(event, PendingEvent):
            answers = [{"id": c.id, "approve": approve(c)[0]} for c in event.pending_tool_calls if c.is_approval]
            # The answer resumes the cell; what follows arrives on this stream (or in this answer's output).
            early = cm.wait(cell.cell_id, approvals=answers, timeout_ms=100)
            for entry in early.output:
                print("output:", entry.text)
        elif isinstance(event, EnvelopeEvent):
            print(event.envelope.status, event.envelope.value)
            return event.envelope.value
    return None


if __name__ == "__main__":
    with Client(os.environ.get("CODEMODE_URL", "http://127.0.0.1:8000"), os.environ.get("CODEMODE_API_KEY")) as cm:
        quote_order(cm)
        watch_cell(cm)
