"""The example shipping plugin: every tool runs and meets its declared contract."""

from __future__ import annotations

import pytest

from service.tools.catalog import ToolCatalog
from service.tools.errors import InvalidInputError, OutputContractError, ToolExecutionError, UnknownToolError
from service.tools.loader import load_plugins
from service.tools.policy import ToolPolicy
from service.tools.session import CallSession


def _view(allow=("group:plugins",)):
    loaded = load_plugins(["service.demo.shipping"], entry_points=False)
    policy = ToolPolicy.from_config({"allow": list(allow)})
    return ToolCatalog.build(loaded.tools, loaded.hooks, policy).view()


@pytest.mark.anyio
async def test_quote_is_deterministic_and_validated(ctx) -> None:
    """quote_shipping returns the same quote for the same input and rejects a bad country code."""
    session = CallSession(_view(), max_calls=10)
    args = {"origin": "US", "destination": "DE", "weight_kg": 2}
    first = await session.call("quote_shipping", args, ctx)
    assert first == await session.call("quote_shipping", args, ctx)
    assert first["currency"] == "USD" and first["price"] == 15.5 and first["service"] == "standard"
    with pytest.raises(InvalidInputError, match=r"\$.origin"):
        await session.call("quote_shipping", {**args, "origin": "USA"}, ctx)


@pytest.mark.anyio
async def test_list_carriers_and_track(ctx) -> None:
    """list_carriers needs no input; track_package is network-derived with raw details."""
    session = CallSession(_view(), max_calls=10)
    carriers = await session.call("list_carriers", None, ctx)
    assert [c["id"] for c in carriers] == ["parcelpost", "swiftfreight", "slowboat"]
    outcome = await session.call_detailed("track_package", {"tracking_number": "ABC123"}, ctx)
    assert outcome.network and outcome.details["tracking_number"] == "ABC123"
    with pytest.raises(InvalidInputError):
        await session.call("list_carriers", {"unexpected": 1}, ctx)


@pytest.mark.anyio
async def test_discriminated_shipments(ctx) -> None:
    """`shipments` output follows the branch of its `action` input."""
    session = CallSession(_view(), max_calls=10)
    assert await session.call("shipments", {"action": "list"}, ctx) == {
        "shipments": ["SHP-1001", "SHP-1002", "SHP-1003"]
    }
    status = await session.call("shipments", {"action": "status", "shipment_id": "SHP-1002"}, ctx)
    assert status == {"shipment_id": "SHP-1002", "status": "delivered", "destination": "FR", "found": True}


@pytest.mark.anyio
async def test_cancel_is_opt_in(ctx) -> None:
    """cancel_shipment is hidden under group:plugins and available when named."""
    with pytest.raises(UnknownToolError):
        await CallSession(_view(), max_calls=5).call("cancel_shipment", {"shipment_id": "SHP-1001"}, ctx)
    session = CallSession(_view(("group:plugins", "cancel_shipment")), max_calls=5)
    assert await session.call("cancel_shipment", {"shipment_id": "SHP-1001"}, ctx) == {
        "shipment_id": "SHP-1001",
        "cancelled": True,
    }
    with pytest.raises(ToolExecutionError) as refused:
        await session.call_detailed("cancel_shipment", {"shipment_id": "SHP-1002"}, ctx)
    assert refused.value.message == "cancel_shipment failed: only undelivered shipments can be cancelled"
    assert refused.value.recoverable and refused.value.to_guest()["needParam"] == "shipment_id"


@pytest.mark.anyio
async def test_wrong_branch_hook_is_caught(ctx) -> None:
    """A hook that swaps the result shape of `shipments` is caught by the branch check."""
    from service.tools.hooks import AfterResult, Hook

    loaded = load_plugins(["service.demo.shipping"], entry_points=False)
    swap = Hook(after=lambda call, result: AfterResult(details={"shipments": []}))
    session = CallSession(ToolCatalog.build(loaded.tools, [swap]).view(), max_calls=5)
    with pytest.raises(OutputContractError):
        await session.call("shipments", {"action": "status", "shipment_id": "SHP-1001"}, ctx)
