"""run()'s bounds against a live service: a cell that yields for ever is stopped at ``max_legs`` or at the
``deadline``, cancelled, and the error says which bound; without them such a run never returned."""

from __future__ import annotations

import asyncio

import pytest
from codemode_client import AsyncClient, Client, RunLimitError

from tests.client.conftest import API_KEY

YIELDING = "for (;;) await yield_control('again')"


def test_a_cell_yielding_for_ever_is_stopped_at_max_legs_and_cancelled(client: Client):
    """Four legs (the exec and three waits, each after a pause), then the cell is cancelled and the error names max_legs."""
    with pytest.raises(RunLimitError) as caught:
        client.run(YIELDING, max_legs=4)
    err = caught.value
    assert err.code == "max_legs_exceeded" and "max_legs=4" in err.message
    assert err.envelope.status == "waiting" and err.envelope.telemetry["legs"] == 4
    status = client.status(err.cell_id)
    assert status.status == "failed" and status.code == "aborted", status


def test_the_async_client_stops_it_at_its_deadline(base_url: str):
    """With a deadline of half a second the run ends, whatever max_legs allows, and the cell is cancelled."""

    async def go() -> tuple[RunLimitError, str | None]:
        async with AsyncClient(base_url, API_KEY, timeout=60) as client:
            with pytest.raises(RunLimitError) as caught:
                await client.run(YIELDING, deadline=0.5)
            return caught.value, (await client.status(caught.value.cell_id)).code

    err, code = asyncio.run(go())
    assert err.code == "deadline_exceeded" and "deadline=0.5 s" in err.message
    assert code == "aborted"
