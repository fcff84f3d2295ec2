"""Warnings a caller can cause on purpose are rate-limited (service/log_limits.py): one line per kind per
interval, the next one saying how many were left out; timed by an injected clock (no sleeps). Through
HTTP: a ``traceparent`` over 512 characters on every request, and runs past their tenant's store quota."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.app import create_app
from service.assembly import build_components
from service.log_limits import LimitedWarnings, LogLimiter
from service.settings import Settings
from service.stores import StoreLimits, open_store, sqlite_url
from service.tools.run_book import RunBook
from service.tools.run_budget import FailureLimits
from service.tracing import tracing_to
from tests.support.tools import TEST_TOOLS

LONG_TRACEPARENT = "00-" + "4bf92f3577b34da6a3ce929d0e0e4736" * 20  # 643 characters
PROPAGATOR_LOGGER = "opentelemetry.trace.propagation.tracecontext"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_per_interval_and_then_the_count_left_out():
    clock = Clock()
    limiter = LogLimiter(clock, interval_s=60)
    assert limiter.allow("a") == 0
    assert [limiter.allow("a") for _ in range(3)] == [None, None, None]
    assert limiter.allow("b") == 0  # each kind on its own
    clock.now += 59.9
    assert limiter.allow("a") is None
    clock.now += 0.1
    assert limiter.allow("a") == 4  # logged now, saying four were left out
    assert limiter.allow("a") is None
    clock.now += 60
    assert limiter.allow("a") == 1 and limiter.allow("b") == 0


def test_a_library_loggers_warnings_are_limited_by_their_format_string(caplog):
    clock = Clock()
    logger = logging.getLogger("tests.limited")
    limited = LimitedWarnings(LogLimiter(clock))
    logger.addFilter(limited)
    try:
        with caplog.at_level(logging.INFO, logger="tests.limited"):
            for i in range(20):
                logger.warning("bad header %d", i)
                logger.info("not limited %d", i)
            logger.warning(ValueError("an object as the message"))
            clock.now += 60
            logger.warning("bad header %d", 99)
    finally:
        logger.removeFilter(limited)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "bad header 0",
        "an object as the message",
        "bad header 99 [19 more like this in the 60 s before were not logged]",
    ]
    assert sum(r.levelno == logging.INFO for r in caplog.records) == 20


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[TestClient, Clock]]:
    clock = Clock()
    settings = Settings(workers=1, data_dir=str(tmp_path), kill_grace_ms=500).check()
    tracing = tracing_to(InMemorySpanExporter(), log_limiter=LogLimiter(clock))
    services = build_components(settings, extra_tools=TEST_TOOLS, tracing=tracing)
    with TestClient(create_app(settings, services)) as client:
        yield client, clock


def test_oversized_traceparent_headers_log_one_line_per_interval(traced, caplog):
    """Twenty requests with a 643-character traceparent: each is served (without a parent), and the
    propagator's warning is logged once; a minute later its next line counts the nineteen left out."""
    client, clock = traced
    headers = {"traceparent": LONG_TRACEPARENT}
    with caplog.at_level(logging.WARNING, logger=PROPAGATOR_LOGGER):
        for _ in range(20):
            assert client.post("/v1/exec", json={"code": "return 1"}, headers=headers).json()["value"] == 1
        clock.now += 60
        client.post("/v1/exec", json={"code": "return 1"}, headers=headers)
    lines = [r.getMessage() for r in caplog.records if r.name == PROPAGATOR_LOGGER]
    assert len(lines) == 2, lines
    assert "traceparent header exceeded the maximum length" in lines[0]
    assert lines[1].endswith("[19 more like this in the 60 s before were not logged]"), lines


@pytest.mark.anyio
async def test_runs_past_the_store_quota_log_one_line_per_interval(tmp_path: Path, caplog) -> None:
    """Every new run whose failure counters do not fit the tenant's store quota is kept in the process;
    that is logged once per interval, the next line counting the runs left out."""
    clock = Clock()
    store = open_store(sqlite_url(tmp_path / "q.db"), StoreLimits(max_tenant_bytes=2000))
    await store.commit("acme", "data", {"k": '"' + "a" * 1990 + '"'}, ())
    book = RunBook(store, FailureLimits(tool_failures_per_run=4, failures_per_run=8), ttl_seconds=3600, clock=clock)

    async def fail_runs(first: int, count: int) -> None:
        for i in range(first, first + count):
            with await book.ledger("acme", "s1", f"r{i}").hold("a") as reservation:
                reservation.fail()
            await book.ledger("acme", "s1", f"r{i}").written()

    with caplog.at_level(logging.WARNING, logger="service.tools.run_book"):
        await fail_runs(0, 10)
        clock.now += 60
        await fail_runs(10, 1)
    await book.close()
    await store.close()
    lines: list[Any] = [r.getMessage() for r in caplog.records if "tenant_store_bytes" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "'r0'" in lines[0] and "'r10'" in lines[1] and "[9 more like this" in lines[1], lines
