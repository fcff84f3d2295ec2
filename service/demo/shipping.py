"""Example tool plugin used by the docs and demo mode: shipping quotes, tracking and shipments.

Enable it with `plugins = ["service.demo.shipping"]` under `[tools]`. All data is fake and
deterministic; nothing touches the network.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bridge.json_types import JsonObject, JsonValue
from service.tools import ToolContext, ToolRegistry, ToolResult, define_tool

PLUGIN_ID = "shipping"

_CARRIERS = (  # id, name, services
    ("parcelpost", "ParcelPost", ("standard", "express")),
    ("swiftfreight", "Swift Freight", ("express",)),
    ("slowboat", "Slow Boat Lines", ("standard",)),
)
_SHIPMENTS = {
    "SHP-1001": {"shipment_id": "SHP-1001", "status": "in_transit", "destination": "DE"},
    "SHP-1002": {"shipment_id": "SHP-1002", "status": "delivered", "destination": "FR"},
    "SHP-1003": {"shipment_id": "SHP-1003", "status": "label_created", "destination": "US"},
}


class QuoteInput(BaseModel):
    """Input of quote_shipping."""

    model_config = ConfigDict(extra="forbid")

    origin: str = Field(description="ISO country code the parcel leaves from", min_length=2, max_length=2)
    destination: str = Field(description="ISO country code the parcel goes to", min_length=2, max_length=2)
    weight_kg: float = Field(description="Parcel weight in kilograms", gt=0, le=1000)
    service: Literal["standard", "express"] = "standard"


_QUOTE_OUTPUT = {
    "type": "object",
    "properties": {
        "quote_id": {"type": "string"},
        "carrier": {"type": "string"},
        "service": {"enum": ["standard", "express"]},
        "price": {"type": "number"},
        "currency": {"const": "USD"},
        "days": {"type": "integer"},
    },
    "required": ["quote_id", "carrier", "service", "price", "currency", "days"],
    "additionalProperties": False,
}


@define_tool(name="quote_shipping", label="Quote shipping", input_schema=QuoteInput, output_schema=_QUOTE_OUTPUT)
async def quote_shipping(call_id: str, params: JsonObject, ctx: ToolContext) -> JsonObject:
    """Price a parcel between two countries; returns carrier, price in USD and transit days."""
    quote = QuoteInput.model_validate(params)
    domestic = quote.origin.upper() == quote.destination.upper()
    base = 4.5 if domestic else 12.0
    factor = 2.0 if quote.service == "express" else 1.0
    price = round((base + quote.weight_kg * 1.75) * factor, 2)
    days = (2 if domestic else 6) // (2 if quote.service == "express" else 1) or 1
    carrier = "swiftfreight" if quote.service == "express" else "parcelpost"
    digest = hashlib.sha256(f"{quote.origin}{quote.destination}{quote.weight_kg}{quote.service}".encode())
    return {
        "quote_id": "Q-" + digest.hexdigest()[:8],
        "carrier": carrier,
        "service": quote.service,
        "price": price,
        "currency": "USD",
        "days": days,
    }


_TRACK_INPUT = {
    "type": "object",
    "properties": {
        "tracking_number": {
            "type": "string",
            "pattern": "^[A-Z0-9]{6,20}$",
            "description": "Carrier tracking number",
        }
    },
    "required": ["tracking_number"],
    "additionalProperties": False,
}
_TRACK_OUTPUT = {
    "type": "object",
    "properties": {
        "tracking_number": {"type": "string"},
        "status": {"enum": ["label_created", "in_transit", "delivered"]},
        "events": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "day": {"type": "integer"},
                    "location": {"type": "string"},
                    "note": {"type": "string"},
                },
                "required": ["day", "location", "note"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["tracking_number", "status", "events"],
    "additionalProperties": False,
}


@define_tool(
    name="track_package",
    label="Track package",
    input_schema=_TRACK_INPUT,
    output_schema=_TRACK_OUTPUT,
    network=True,
)
async def track_package(call_id: str, params: JsonObject, ctx: ToolContext) -> ToolResult:
    """Tracking history of a parcel as reported by the carrier (carrier notes are untrusted text)."""
    number = str(params["tracking_number"])  # a string: the input schema says so
    steps = int(hashlib.sha256(number.encode()).hexdigest(), 16) % 3 + 1
    places = ["Origin depot", "Sorting hub", "Destination depot"]
    events = [{"day": i + 1, "location": places[i], "note": f"Scanned at {places[i].lower()}"} for i in range(steps)]
    status = ["label_created", "in_transit", "delivered"][steps - 1]
    details = {"tracking_number": number, "status": status, "events": events}
    return ToolResult(details=details, text=f"{number}: {status} ({steps} scans)")


@define_tool(
    name="list_carriers",
    label="List carriers",
    output_schema={
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "services": {"type": "array", "items": {"enum": ["standard", "express"]}},
            },
            "required": ["id", "name", "services"],
            "additionalProperties": False,
        },
    },
)
async def list_carriers(call_id: str, params: JsonObject, ctx: ToolContext) -> list[JsonObject]:
    """Carriers this account can book, with the services each offers."""
    return [{"id": carrier, "name": name, "services": list(services)} for carrier, name, services in _CARRIERS]


_SHIPMENT_LIST = {
    "type": "object",
    "properties": {"shipments": {"type": "array", "items": {"type": "string"}}},
    "required": ["shipments"],
    "additionalProperties": False,
}
_SHIPMENT_STATUS = {
    "type": "object",
    "properties": {
        "shipment_id": {"type": "string"},
        "status": {"type": "string"},
        "destination": {"type": "string"},
        "found": {"type": "boolean"},
    },
    "required": ["shipment_id", "found"],
    "additionalProperties": False,
}


@define_tool(
    name="shipments",
    label="Shipments",
    input_schema={
        "type": "object",
        "properties": {"action": {"enum": ["list", "status"]}, "shipment_id": {"type": "string"}},
        "required": ["action"],
        "additionalProperties": False,
    },
    output_schema={
        "anyOf": [_SHIPMENT_LIST, _SHIPMENT_STATUS],
        "x-openclaw-input-discriminator": {
            "version": 1,
            "inputProperty": "action",
            "mapping": {"list": 0, "status": 1},
        },
    },
)
async def shipments(call_id: str, params: JsonObject, ctx: ToolContext) -> JsonObject:
    """`{action: "list"}` lists shipment ids; `{action: "status", shipment_id}` returns one shipment."""
    if params["action"] == "list":
        ids: list[JsonValue] = [*sorted(_SHIPMENTS)]
        return {"shipments": ids}
    shipment_id = str(params.get("shipment_id", ""))  # a string: the input schema says so
    found = _SHIPMENTS.get(shipment_id)
    if found is None:
        return {"shipment_id": shipment_id, "found": False}
    return {**found, "found": True}


@define_tool(
    name="cancel_shipment",
    label="Cancel shipment",
    input_schema={
        "type": "object",
        "properties": {"shipment_id": {"type": "string"}},
        "required": ["shipment_id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "shipment_id": {"type": "string"},
            "cancelled": {"type": "boolean"},
            "message": {"type": "string"},
        },
        "required": ["shipment_id", "cancelled"],
        "additionalProperties": False,
    },
    optional=True,
)
async def cancel_shipment(call_id: str, params: JsonObject, ctx: ToolContext) -> ToolResult:
    """Cancel a shipment that has not been delivered (opt-in: allow "cancel_shipment" explicitly)."""
    shipment_id = str(params["shipment_id"])  # a string: the input schema says so
    shipment = _SHIPMENTS.get(shipment_id)
    if shipment is None or shipment["status"] == "delivered":
        # Recoverable: another shipment id may work, so the failure never counts against the run.
        return ToolResult(
            details={
                "shipment_id": shipment_id,
                "cancelled": False,
                "error_type": "recoverable",
                "need_param": "shipment_id",
            },
            text="only undelivered shipments can be cancelled",
            is_error=True,
        )
    # Fake data: report success without mutating the shared table, so runs stay deterministic.
    return ToolResult(
        details={"shipment_id": shipment_id, "cancelled": True},
        text=f"cancelled {shipment_id}",
    )


TOOLS = (quote_shipping, track_package, list_carriers, shipments, cancel_shipment)


def register(registry: ToolRegistry) -> None:
    """Register the shipping tools."""
    for spec in TOOLS:
        registry.add_tool(spec)
