"""Every run's failure counters as one process knows them, and their writes to the session store.

A cell's tool calls never wait for the store: ``RunBook.ledger`` hands out a view shared by every
cell of the run in this process (so reservations hold across its cells), read from the store before
the cell takes a worker (``refresh``) and again in the background at most once a second while its
calls consult it.  Counted failures are written by one writer task in batches (at most one batch
every ``BATCH_SECONDS``, one store transaction or round trip each), so a burst of failures costs the
store a few writes instead of one fsync per failure.  A cell's end waits for the batch that carries
its failures (``written``: its worker is already free), so its result is returned once other cells,
replicas and restarts can see them, unless the store just failed a write: then nothing waits and the
writer retries.  A write whose answer was lost (a timeout) may be counted twice, never not at all.

Without a store the book is where counters live: at most ``max_runs`` runs, each for ``ttl_seconds``
after its last failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from service.log_limits import LogLimiter
from service.stores.base import RunFailures, RunIncrement

#: The run of a session's cells that name no ``run_id``: they all share it (and its saved results).
DEFAULT_RUN = "default"
from service.stores.errors import StoreError
from service.tools.run_budget import FailureLimits, RunKey, RunLedger, RunState

__all__ = ["BATCH_SECONDS", "RunBook", "RunCounters", "RunWriter"]

log = logging.getLogger(__name__)

#: A view is re-read from the store at most this often (seconds): a block made by another
#: replica's cell shows soon, yet a tool call never costs a store round trip.
REFRESH_SECONDS = 1.0
#: The writer sends at most one batch this often (seconds), of at most this many runs ...
BATCH_SECONDS = 0.05
BATCH_RUNS = 256
#: ... and waits this long after a failed write before it tries again.
RETRY_SECONDS = 1.0


class RunCounters(Protocol):
    """Where runs' counters are stored (the session store)."""

    async def add_run_failures(self, increments: Sequence[RunIncrement]) -> list[RunFailures | None]: ...

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures: ...

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None: ...


class RunBook:
    """The runs of this process: their views (read from the store, cached, bounded) and their
    reservations; the failures still to write go to its ``RunWriter``."""

    def __init__(
        self,
        store: RunCounters | None,
        limits: FailureLimits,
        *,
        ttl_seconds: float,
        max_runs: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.limits = limits
        self._ttl = ttl_seconds
        self._max_runs = max_runs
        self._clock = clock
        self._runs: OrderedDict[RunKey, tuple[RunState, float]] = OrderedDict()  # state, expires at
        self._reads: dict[RunKey, asyncio.Task[None]] = {}
        # Each kind of store problem is logged once a minute at most: a hung store, or a tenant whose every
        # new run is past its quota, would flood the log.
        self._warnings = LogLimiter(clock)
        self._writer = None if store is None else RunWriter(store, self._warnings, clock)

    # ---- ledgers -------------------------------------------------------------------------------

    def ledger(self, tenant: str, session_id: str, run_id: str) -> RunLedger:
        """The shared view of a session's run."""
        return RunLedger(self._state((tenant, session_id, run_id)), self.limits, self)

    def own_ledger(self) -> RunLedger:
        """A run of its own (a cell without a session): kept only in the ledger, never stored."""
        return RunLedger(RunState(), self.limits)

    async def refresh(self, ledger: RunLedger) -> None:
        """Re-read the run's counters unless this process read them less than a second ago (a
        caller bounds the wait; the store's own timeout bounds it anyway)."""
        state = ledger.state
        if self.fresh(state):
            return
        await asyncio.shield(self._read(state))

    def counted(self, state: RunState) -> None:
        """A failure was counted in ``state``: write it with the next batch."""
        if state.key is None:
            return
        found = self._runs.get(state.key)
        if found is not None and found[0] is state:
            self._runs[state.key] = (state, self._clock() + self._ttl)  # it lives on from its latest failure
        if self._writer is None or not state.persist:
            state.keep_here()
            return
        self._writer.add(state)

    async def written(self, state: RunState) -> None:
        """Wait until the failures counted in ``state`` so far are stored (or a write of them failed,
        or they were dropped: the run was ended, or the store has been failing for long)."""
        if self._writer is not None:
            await self._writer.written(state)

    def consulted(self, state: RunState) -> None:
        """A call looked at ``state``: re-read it in the background when it is over a second old."""
        if not self.fresh(state):
            self._read(state)

    # ---- the run routes ------------------------------------------------------------------------

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        """The run's counters, with the failures this process has not written yet."""
        key = (tenant, session_id, run_id)
        found = self._runs.get(key)
        if self.store is None:
            return found[0].view() if found and not self._expired(found) else RunFailures()
        if found is not None and not found[0].persist:
            return found[0].view()
        stored = await self.store.run_failures(*key)
        if found is None:
            return stored
        state = found[0]
        return RunState(
            seen=stored, unwritten=state.unwritten, unwritten_blocks=state.unwritten_blocks, writing=state.writing
        ).view()

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        """Forget the run: its view here, its unwritten failures and what the store holds."""
        key = (tenant, session_id, run_id)
        found = self._runs.pop(key, None)
        if self._writer is not None:
            self._writer.drop(key)
        if found is not None:
            found[0].forget()
        if self._writer is not None:
            await self._writer.delete(key)

    async def close(self) -> None:
        """Stop reading and write what is still unwritten (``RunWriter.close``)."""
        for task in list(self._reads.values()):
            task.cancel()
        if self._writer is not None:
            await self._writer.close()

    # ---- inside --------------------------------------------------------------------------------

    def _state(self, key: RunKey) -> RunState:
        found = self._runs.get(key)
        if found is not None and not self._expired(found):
            self._runs.move_to_end(key)
            return found[0]
        self._runs.pop(key, None)
        self._make_room()
        state = RunState(key)
        self._runs[key] = (state, self._clock() + self._ttl)
        return state

    def _expired(self, found: tuple[RunState, float]) -> bool:
        return found[1] <= self._clock() and not found[0].busy

    def _make_room(self) -> None:
        """Drop the least recently used runs so one more fits in ``max_runs``, looking at a few only.

        Runs with calls in flight or a write under way stay (and go to the back); so do runs whose
        failures wait to be written, until the book holds twice ``max_runs`` (a store down for
        long): then those failures are dropped, and the drop is logged.
        """
        excess = len(self._runs) + 1 - self._max_runs
        if excess <= 0:
            return
        crowded = len(self._runs) >= 2 * self._max_runs
        for key in list(itertools.islice(self._runs, 2 * excess + 8)):
            state = self._runs[key][0]
            if state.held or state.writing or (state.unwritten and not crowded):
                self._runs.move_to_end(key)
                continue
            if state.unwritten:
                if self._writer is not None:
                    self._writer.drop(key)
                state.forget()
                _complain(
                    self._warnings, "runs' tool failures dropped unwritten", "the store has been failing for long"
                )
            del self._runs[key]
            excess -= 1
            if not excess:
                return

    def fresh(self, state: RunState) -> bool:
        """Whether the run's counters need no re-read now (no store, or read less than a second ago)."""
        if self.store is None or state.key is None or not state.persist:
            return True
        return state.read_at is not None and self._clock() - state.read_at < REFRESH_SECONDS

    def _read(self, state: RunState) -> asyncio.Task[None]:
        """One read of the run at a time, shared by everyone who asks meanwhile."""
        assert state.key is not None and self.store is not None
        task = self._reads.get(state.key)
        if task is None:
            task = self._reads[state.key] = asyncio.ensure_future(self._read_now(state))
        return task

    async def _read_now(self, state: RunState) -> None:
        assert state.key is not None and self.store is not None
        version = state.version
        try:
            found = await self.store.run_failures(*state.key)
        except StoreError as exc:
            _complain(self._warnings, "run failure counters unavailable, using the last ones seen", exc)
        else:
            # A write that started meanwhile answers with fresher counters than this read.
            if state.version == version and state.writing is None:
                state.seen = found
        finally:
            state.read_at = self._clock()  # also after a failure: at most one attempt a second
            self._reads.pop(state.key, None)


class RunWriter:
    """The stored runs' counted failures on their way to the store: one writer task sends them in
    batches, and a cell's end waits (``written``) for the batch that carries its own."""

    def __init__(self, store: RunCounters, warnings: LogLimiter, clock: Callable[[], float]) -> None:
        self._store = store
        self._warnings = warnings
        self._clock = clock
        self._dirty: dict[RunKey, RunState] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # a delete never runs between a batch's write and its answer
        self._store_failing = False  # the last write failed: cells do not wait for the retry
        self._wrote: asyncio.Event | None = None  # set (and replaced) after each write attempt
        self._closing = asyncio.Event()

    def add(self, state: RunState) -> None:
        """``state`` (a stored run's) has failures to write: send them with the next batch."""
        assert state.key is not None
        self._dirty[state.key] = state
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._write_batches())

    def drop(self, key: RunKey) -> None:
        """Forget the run's failures still to write (the run was ended, or dropped from the book)."""
        self._dirty.pop(key, None)

    async def written(self, state: RunState) -> None:
        """Wait until the failures counted in ``state`` so far are stored, a write of them failed or
        they were dropped."""
        while self._pending(state) and not self._store_failing:
            if self._wrote is None:
                self._wrote = asyncio.Event()
            await self._wrote.wait()

    async def delete(self, key: RunKey) -> None:
        """Delete the run's stored counters, never between a batch's write and its answer."""
        async with self._lock:
            await self._store.delete_run_failures(*key)

    async def close(self) -> None:
        """Write what is still unwritten (batch after batch, each within the store's timeout, until
        one fails).  A write under way is waited for, not cancelled: its answer says what it stored."""
        self._closing.set()
        if self._task is not None and not self._task.done():
            await self._task
        elif self._dirty:
            await self._write_batches()

    def _pending(self, state: RunState) -> bool:
        return state.writing is not None or (state.key is not None and self._dirty.get(state.key) is state)

    async def _write_batches(self) -> None:
        while self._dirty:
            wrote = await self._write_batch()
            if self._closing.is_set():
                if not wrote:
                    return
                continue
            with contextlib.suppress(TimeoutError):  # the pause between batches; close() ends it
                async with asyncio.timeout(BATCH_SECONDS if wrote else RETRY_SECONDS):
                    await self._closing.wait()

    async def _write_batch(self) -> bool:
        """Write every run's unwritten failures at once; False when the store failed (they stay)."""
        taken = [self._dirty.pop(key) for key in list(itertools.islice(self._dirty, BATCH_RUNS))]
        states = [s for s in taken if s.unwritten and s.writing is None]
        if not states:
            return True
        batch = [state.start_write() for state in states]
        try:
            async with self._lock:
                answers = await self._store.add_run_failures(batch)
        except BaseException as exc:
            for state in states:
                state.write_failed()
                self._dirty.setdefault(state.key, state)  # type: ignore[arg-type]  # stored runs have keys
            self._store_failing = True
            self._announce_write()
            if not isinstance(exc, Exception):
                raise
            if not isinstance(exc, StoreError):
                log.exception("writing runs' tool failures failed (kept, retried)")
            _complain(
                self._warnings, "could not write runs' tool failures (kept, retried)", f"{len(batch)} runs: {exc}"
            )
            return False
        now = self._clock()
        for state, found in zip(states, answers):
            state.written(found, now)
            if found is None and state.key is not None:
                self._warnings.warning(
                    log,
                    "store quota",
                    "tool failures of run %r of tenant %r (and of later runs like it) are kept in this process "
                    "only: the tenant's session-store quota (tenant_store_bytes) is full",
                    state.key[2],
                    state.key[0],
                )
        self._store_failing = False
        self._announce_write()
        return True

    def _announce_write(self) -> None:
        if self._wrote is not None:
            self._wrote.set()
            self._wrote = None


def _complain(warnings: LogLimiter, what: str, exc: Exception | str) -> None:
    """Log a store problem (``what``, then why), once a minute at most for each kind."""
    warnings.warning(log, what, "%s: %s", what, exc)
