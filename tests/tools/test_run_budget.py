"""The run's failure budget under concurrency, and its counters' batched writes (a real SQLite store).

A call reserves its place before it runs, so concurrent calls of a failing tool run as often as the
budget allows; counted failures reach the store in batches, off the calls' path.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from service.stores import RunFailures, RunIncrement, StoreLimits, open_store, sqlite_url
from service.stores.sqlite import SqliteSessionStore
from service.tools.catalog import ToolCatalog
from service.tools.errors import ToolCallError
from service.tools.plugin import ToolContext, ToolSpec
from service.tools.run_book import RunBook
from service.tools.run_budget import Breaker, FailureLimits
from service.tools.session import CallSession
from tests.support.polling import apoll_until

pytestmark = pytest.mark.anyio
LIMITS = FailureLimits(tool_failures_per_run=4, failures_per_run=8)


class CountingStore(SqliteSessionStore):
    """The real SQLite store, counting the batches written to it (what the test observes)."""

    batches: list[int]

    async def add_run_failures(self, increments: Sequence[RunIncrement]) -> list[RunFailures | None]:
        self.batches.append(len(increments))
        return await super().add_run_failures(increments)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    store = CountingStore(tmp_path / "s.db", StoreLimits(), timeout_seconds=0.3)
    store.batches = []
    await store.ping()
    yield store
    await store.close()


class Flaky:
    """An idempotent tool that always raises ConnectionError (optionally after an event), counting runs."""

    def __init__(self, name: str = "flaky", *, fail: bool = True) -> None:
        self.runs = 0
        self.running = 0
        self.most_running = 0
        self.release = asyncio.Event()
        self.fail = fail
        self.spec = ToolSpec(
            name=name, description="flaky read", execute=self._execute, idempotent=True, input_schema={"type": "object"}
        )

    async def _execute(self, call_id: str, params: Any, ctx: ToolContext) -> Any:
        self.runs += 1
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if not self.fail:
                await self.release.wait()
                return {"i": params.get("i")}
            await asyncio.sleep(0)
            raise ConnectionError("connection reset by peer")
        finally:
            self.running -= 1


def _session(book: RunBook, tools: list[ToolSpec], run: str = "r1", breaker: Breaker | None = None) -> CallSession:
    view = ToolCatalog.build(tools).view()
    return CallSession(view, max_calls=1000, ledger=book.ledger("acme", "s1", run), breaker=breaker or Breaker())


def _ctx(run: str = "r1") -> ToolContext:
    return ToolContext(tenant="acme", session_id="s1", run_id=run, cell_id="cell_1", call_id="call_1")


async def _codes(session: CallSession, tool: str, n: int, run: str = "r1") -> list[str]:
    async def one(i: int) -> str:
        try:
            await session.call(tool, {"i": i}, _ctx(run))
        except ToolCallError as exc:
            return exc.code
        return "ok"

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def test_a_burst_of_failing_calls_runs_only_what_the_budget_allows(store: CountingStore) -> None:
    """100 concurrent calls of an always-failing idempotent tool: 4 run (2 of them retried twice, the
    breaker's bound), 96 are refused tool_blocked without running; the store counts 4 failures."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    flaky = Flaky()
    codes = await _codes(_session(book, [flaky.spec]), "flaky", 100)
    assert codes.count("tool_error") == 4 and codes.count("tool_blocked") == 96
    assert flaky.runs == 2 * 3 + 2 * 1
    await book.close()
    assert (await store.run_failures("acme", "s1", "r1")).failures == {"flaky": 4}


async def test_cells_of_one_run_share_the_places(store: CountingStore) -> None:
    """Two sessions (two cells) of the same run draw on one budget: together they run 4 calls, not 8."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    flaky = Flaky()
    first, second = _session(book, [flaky.spec]), _session(book, [flaky.spec])
    codes = await asyncio.gather(_codes(first, "flaky", 30), _codes(second, "flaky", 30))
    assert sum(c.count("tool_error") for c in codes) == 4
    await book.close()


async def test_calls_beyond_the_places_wait_and_then_run(store: CountingStore) -> None:
    """Healthy calls are held to the tool's failures left (4 in flight at once) and all complete."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    slow = Flaky("slow", fail=False)
    session = _session(book, [slow.spec])
    burst = asyncio.ensure_future(_codes(session, "slow", 20))
    await apoll_until(lambda: slow.running == 4, "four calls in flight")
    slow.release.set()
    assert await burst == ["ok"] * 20
    assert slow.most_running == 4 and slow.runs == 20


async def test_failures_reach_the_store_in_batches(store: CountingStore) -> None:
    """Failures of 40 runs counted at once are written in a few batches, not one write per failure."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    flaky = Flaky()
    breaker = Breaker()
    sessions = [_session(book, [flaky.spec], run=f"r{i}", breaker=breaker) for i in range(40)]
    await asyncio.gather(*(_codes(s, "flaky", 1, run=f"r{i}") for i, s in enumerate(sessions)))
    await apoll_until(lambda: sum(store.batches) >= 40, "every run written")
    assert len(store.batches) <= 3, store.batches
    for i in (0, 39):
        assert (await store.run_failures("acme", "s1", f"r{i}")).failures == {"flaky": 1}
    await book.close()


async def test_a_locked_store_delays_the_write_not_the_calls(store: CountingStore, caplog) -> None:
    """While another process holds the SQLite write lock, failures are counted here and still block
    the tool; once the lock goes, the writer's retry stores them."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    flaky = Flaky()
    foreign = sqlite3.connect(store.path, isolation_level=None)
    foreign.execute("BEGIN IMMEDIATE")
    try:
        with caplog.at_level(logging.WARNING, logger="service.tools.run_book"):
            codes = await _codes(_session(book, [flaky.spec]), "flaky", 10)
            assert codes.count("tool_error") == 4 and codes.count("tool_blocked") == 6
            await apoll_until(lambda: "could not write" in caplog.text, "the failed write logged")
    finally:
        foreign.execute("ROLLBACK")
        foreign.close()
    await apoll_until(lambda: not book._writer._dirty, "the failures written after the lock went")  # noqa: SLF001
    assert (await store.run_failures("acme", "s1", "r1")).failures == {"flaky": 4}
    await book.close()


async def test_counters_over_the_tenant_quota_are_kept_here_only(tmp_path: Path, caplog) -> None:
    """When the tenant's store bytes are full, a new run's counters are not stored but still block here."""
    store = open_store(sqlite_url(tmp_path / "q.db"), StoreLimits(max_tenant_bytes=2000))
    await store.commit("acme", "data", {"k": '"' + "a" * 1990 + '"'}, ())
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    flaky = Flaky()
    with caplog.at_level(logging.WARNING, logger="service.tools.run_book"):
        codes = await _codes(_session(book, [flaky.spec]), "flaky", 6)
        await book.close()
    assert codes.count("tool_error") == 4 and codes.count("tool_blocked") == 2
    assert (await store.run_failures("acme", "s1", "r1")).failures == {}
    assert (await book.run_failures("acme", "s1", "r1")).failures == {"flaky": 4}
    assert "tenant_store_bytes" in caplog.text
    await store.close()


async def test_without_a_store_runs_expire_and_stay_bounded() -> None:
    """The book is the store then: a run's counters live ttl_seconds after its last failure, and at
    most max_runs runs are kept (the least recently used go first)."""
    now = [1000.0]
    book = RunBook(None, LIMITS, ttl_seconds=60, max_runs=2, clock=lambda: now[0])

    async def fail(run: str) -> None:
        with await book.ledger("t", "s", run).hold("a") as reservation:
            reservation.fail()

    await fail("r1")
    now[0] += 61
    assert (await book.run_failures("t", "s", "r1")).failures == {}
    for run in ("r2", "r3", "r4"):
        await fail(run)
    assert (await book.run_failures("t", "s", "r2")).failures == {}  # the oldest run went first
    assert (await book.run_failures("t", "s", "r4")).failures == {"a": 1}


async def test_a_long_store_outage_keeps_the_book_bounded(tmp_path: Path, caplog) -> None:
    """While every write fails, runs with unwritten failures stay, up to twice max_runs; past that the
    oldest are dropped (and that is logged), so an outage cannot grow the book without bound."""
    store = open_store(sqlite_url(tmp_path / "gone.db"), StoreLimits())
    await store.close()  # every call now fails store_unavailable
    book = RunBook(store, LIMITS, ttl_seconds=3600, max_runs=4)
    with caplog.at_level(logging.WARNING, logger="service.tools.run_book"):
        for i in range(30):
            with await book.ledger("acme", "s1", f"r{i}").hold("a") as reservation:
                reservation.fail()
            await asyncio.sleep(0)
    assert len(book._runs) <= 2 * 4 + 1  # noqa: SLF001 - the bound is the book's own size
    assert "dropped unwritten" in caplog.text
    await book.close()


async def test_ending_a_run_drops_its_unwritten_failures(store: CountingStore) -> None:
    """A run ended before its failures were written: nothing reaches the store, a cell waiting for
    the write is let go, and the run starts again from zero."""
    book = RunBook(store, LIMITS, ttl_seconds=3600)
    ledger = book.ledger("acme", "s1", "r1")
    with await ledger.hold("a") as reservation:
        reservation.fail(non_retriable=True, reason="gone")
    await book.delete_run_failures("acme", "s1", "r1")
    async with asyncio.timeout(5):
        await ledger.written()
    await book.close()
    assert (await store.run_failures("acme", "s1", "r1")).failures == {}
    assert book.ledger("acme", "s1", "r1").blocked() == set() and ledger.blocked() == set()
