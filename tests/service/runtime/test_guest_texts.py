"""A cell's value and output go back as the worker wrote them, checked as JSON first, never parsed on the loop.

The service embeds a worker's texts in envelopes as they are (``jsoncodec.fragment``), so no Python
objects of a large value are ever built on the event loop.  A worker may be owned by an attacker, so
every such text is checked to be one JSON value first: small ones on the loop, large ones in a helper
process of the cell's own principal.  The worker here is the test-only payload
(``tests/support/compromised_worker.py``, ``forge_texts``), which writes whatever texts it is told.
"""

from __future__ import annotations

import asyncio
import functools
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge import jsoncodec
from service.assembly import Components, build_components
from service.auth import LOCAL_TENANT
from service.runtime.cell import NOT_JSON_MESSAGE
from service.runtime.envelopes import SealedEnvelope, plain
from service.runtime.json_texts import INLINE_BYTES
from service.runtime.spec import CellSpec
from service.runtime.workers import supply
from service.runtime.workers.process import start_worker
from service.settings import Settings

#: A value that is not JSON but would make a well-formed envelope with a forged field, were it embedded.
INJECTED = '1,"status":"completed","forged":true'
#: The same idea, larger than what the loop checks itself: it goes to a helper (as the payload builds it).
LARGE_NOT_JSON = ["[", "1,", INLINE_BYTES, '2],"forged":true']


def _run(settings: Settings, body: Callable[[Components], Any], plan: dict[str, Any] | None = None) -> Any:
    async def scenario() -> Any:
        svc = build_components(settings.check())
        await svc.start()
        try:
            return await body(svc)
        finally:
            await svc.close()

    if plan is None:
        return asyncio.run(scenario())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(supply, "start_worker", functools.partial(start_worker, test_payload=json.dumps(plan)))
        return asyncio.run(scenario())


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings().replace(data_dir=str(tmp_path), workers=1, sandbox="off", log_level="warning")


async def _exec(
    svc: Components, code: str = "return 1", timeout_ms: int | None = None, max_output_bytes: int | None = None
) -> Any:
    limits = svc.cells.limits(timeout_ms=timeout_ms, memory_limit_bytes=None, max_output_bytes=max_output_bytes)
    spec = CellSpec(code=code, tenant=LOCAL_TENANT, limits=limits)
    return await svc.cells.exec(spec), spec


@pytest.mark.parametrize(
    "value",
    [INJECTED, LARGE_NOT_JSON, "NaN", ["[", "1,", INLINE_BYTES, "-Infinity]"]],
    ids=["small", "large", "nan", "large-infinity"],
)
def test_a_value_that_is_not_json_fails_its_cell_and_is_never_embedded(settings, value):
    """A worker's value that is not one JSON value (one that would add fields to the envelope, or a NaN or
    Infinity, which Python's own parser reads) fails the cell; the envelope the caller gets is JSON and holds
    no forged field."""

    async def body(svc: Components) -> dict[str, Any]:
        envelope, spec = await _exec(svc)
        assert isinstance(envelope, SealedEnvelope)
        decoded = jsoncodec.loads(envelope.encoded)
        if isinstance(value, list):
            assert spec.principal in svc.helpers.seats, "a large text is checked in the principal's helper"
        return decoded  # type: ignore[no-any-return]

    envelope = _run(settings, body, {"forge_texts": {"value": value}})
    assert (envelope["status"], envelope["code"]) == ("failed", "internal_error"), envelope
    assert "not JSON" in envelope["error"] and "forged" not in envelope and "value" not in envelope, envelope


def test_a_large_value_that_is_json_is_checked_in_a_helper_and_embedded_as_written(settings):
    """200 KB of tiny arrays is checked off the event loop and goes into the envelope as written."""

    async def body(svc: Components) -> tuple[Any, bool]:
        envelope, spec = await _exec(svc, max_output_bytes=1 << 20)
        return envelope, spec.principal in svc.helpers.seats

    envelope, in_helper = _run(settings, body, {"forge_texts": {"value": ["[", "[0],", 50_000, "[1]]"]}})
    assert in_helper, "the 200 KB value was checked off the event loop"
    assert b'"value":[[0],[0],' in envelope.encoded and envelope["status"] == "completed", envelope
    assert plain(envelope)["value"][-2:] == [[0], [1]]


def test_output_that_is_not_json_in_a_waiting_envelope_stops_the_worker(settings):
    """A parked cell's waiting envelope embeds its output as written: output that is not JSON ends the
    cell, and the worker that wrote it is stopped."""

    async def body(svc: Components) -> Any:
        envelope, _ = await _exec(svc, timeout_ms=500)
        return envelope, [w.stop_reason for w in svc.pool.supply.alive if w.dead]

    envelope, stopped = _run(settings, body, {"forge_texts": {"output": [INJECTED]}})
    assert (envelope["status"], envelope["code"]) == ("failed", "runtime_unavailable"), envelope
    assert envelope["error"].startswith(NOT_JSON_MESSAGE) and envelope["output"] == [], envelope


def test_a_large_value_builds_no_objects_on_the_event_loop(settings):
    """A real cell returning 250,000 one-number arrays (1 MB of JSON, ~20 MB as Python objects): the
    service's own allocations while it runs stay a small multiple of the text (its copies: the raw frame,
    its text, the envelope's encoding), because the value is never parsed in the service process.  The
    value is no larger than it must be for that gap to show: at a busy machine's share of a CPU a worker
    builds a million arrays too slowly for any fixed deadline."""
    code = "const pad = []; for (let i = 0; i < 250000; i++) pad.push([i % 10]); return pad"
    settings = settings.replace(max_output_bytes=10 * 1024 * 1024)

    async def body(svc: Components) -> tuple[Any, int]:
        await _exec(svc)  # a warm worker and helper: their start-up is not the cell's cost
        spec = CellSpec(
            code=code,
            tenant=LOCAL_TENANT,
            limits=svc.cells.limits(timeout_ms=60_000, memory_limit_bytes=512 << 20, max_output_bytes=10 << 20),
        )
        tracemalloc.start()
        try:
            envelope = await svc.cells.exec(spec)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return envelope, peak

    envelope, peak = _run(settings, body)
    assert envelope["status"] == "completed", envelope
    size = len(envelope.encoded)
    assert size > 1_000_000
    assert peak < 8 * size, f"the service allocated {peak} bytes for a {size}-byte envelope"
