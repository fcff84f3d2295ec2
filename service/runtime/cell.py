"""One cell's life: run legs on its worker, dispatch host work, park, resume, end.

A *leg* is one exec or wait call.  In a leg the cell's guest runs on its worker until it
completes, fails, or blocks on host work.  Blocked cells wait inline for replies until the
leg's deadline; at the deadline (or at once, when a request needs the API caller) the cell is
*parked* and the leg answers ``waiting``.  Host work keeps running while parked; its replies are
charged to the inbox and delivered on the next wait.  Only this module orchestrates that, so
HTTP and the CLI behave the same.

Where a cell is lives in its ``CellState`` (``state.py``: a phase moved only along legal edges, and
whether its leg holds the process); what a leg does next is decided by one rule (``step.py``), which
the leg asks between its awaits and the worker pipe's read callback asks to answer a guest in place.
The cell applies the rule's answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import TYPE_CHECKING

from bridge.errors import InvalidSource
from bridge.inbox import HeldAccount
from bridge.messages import (
    DoneFrame,
    WorkerFrame,
    run_frame,
    settle_frame,
)
from bridge.output import OutputState, received_value
from service.errors import WorkerGone
from service.runtime.workers.pool import WorkerPool
from service.runtime.workers.process import Worker

from . import envelopes
from .call_log import CallLog
from .cell_moves import CellMoves, guest_config
from .clocks import LegClock
from .dispatch import CellContext, Dispatcher, HostCall
from .ending import Completed, Failed, FinalEnvelope, Outcome, Retainer, Retention, marked
from .envelopes import Envelope, LegFields
from .json_texts import INLINE, JsonTexts
from .life_bounds import UNBOUNDED, LifeBounds
from .movable_requests import MovableRequests
from .quotas import TenantQuotas
from .spec import CellSpec, CellStatus, EndReason
from .state import CellState, Phase
from .step import LegView, Step, answers_in_place, next_step

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from service.tracing import TraceParent, Tracing

    from .parked_cells import ParkedCells


TIMEOUT_MESSAGE = "cell timeout exceeded"
ABORT_MESSAGE = "cell aborted: it was cancelled or expired; start a new cell"
OVERRUN_MESSAGE = (
    "another cell sharing this worker process ignored its deadline and the "
    "process was killed (SIGKILL at deadline + kill_grace_ms)"
)
NOT_JSON_MESSAGE = (
    "the worker process sent output that is not JSON, so it was stopped; the cell was lost, start it again"
)
SNAPSHOT_MESSAGE = "cell snapshot limit exceeded: its heap is over max_snapshot_bytes, so it cannot be parked"
#: How long a park waits for its process (another cell's leg runs there) to write the cell out.
WRITE_OUT_WAIT_S = 2.0


class Cell(CellMoves):
    """A running or parked cell and its worker."""

    def __init__(
        self,
        spec: CellSpec,
        worker: Worker,
        pool: WorkerPool,
        dispatcher: Dispatcher,
        quotas: TenantQuotas,
        retainer: Retainer | None = None,
        id_prefix: str = "cell_",
        context: CellContext | None = None,
        account: HeldAccount | None = None,
        clock: Callable[[], float] = time.monotonic,
        json_texts: JsonTexts = INLINE,
        bounds: LifeBounds = UNBOUNDED,
        parked_cells: ParkedCells | None = None,
    ) -> None:
        # ``context``: made (and prepared) before the cell took its worker.
        self.context = context or CellContext(id_prefix + str(uuid.uuid4()), spec)
        self.id = self.context.id
        self.spec = spec
        self.worker: Worker | None = worker
        self.pool = pool
        self.dispatcher = dispatcher
        self.state = CellState()
        self.output = OutputState(spec.limits.max_output_bytes)
        context = self.context  # not ``self``: a cell its requests point back to is freed only by the collector
        self.requests = MovableRequests(
            dispatcher,
            spec.limits.inbox_bytes,
            spec.limits.max_pending_requests,
            lambda request_id, method, raw: HostCall(context, request_id, method, raw),
            max_request_bytes=spec.limits.max_request_bytes,
            max_request_values=spec.limits.max_request_values,
            account=account,
        )
        if spec.call_log:
            self.requests.log = CallLog(self.requests.inbox)
        self.telemetry = self.context.telemetry
        self.end_reason: EndReason | None = None
        self._clock, self._bounds = clock, bounds  # ``bounds``: the legs it may run, the seconds it may live
        self._json_texts = json_texts  # checks the guest's texts an envelope embeds as they are
        self.born = self.last_active = clock()  # its lifetime counts from born; idle expiry from its last leg's stop
        self.final: Envelope | None = None
        self.wait_lock = asyncio.Lock()
        self._delivered_bytes = 0  # inbox bytes handed to the worker, released on its next frame
        self._leg_started = self._born_at = time.perf_counter()
        self._quotas = quotas
        # Done once ``final`` is set: its owner (the registry) subscribes to it to record the end.
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # The running leg's clock and deadline (event-loop time), for replies delivered in place;
        # None between legs, since the clock refers back to this cell (a cycle left behind made
        # every finished cell wait for the garbage collector: 5 µs more per `return 1`).
        self._leg_times: tuple[LegClock, float] | None = None
        self._retainer = retainer
        self._abort_event = asyncio.Event()
        self._lost_task: asyncio.Task[None] | None = None  # kept referenced until it ran
        # Where a parked Python cell is written out (parked_cells.py), and whether its record is the current one.
        self._parked_cells, self.written_out = parked_cells, False
        self.requests.keep_args = parked_cells is not None
        pool.attach(worker, self.id, self._process_lost)

    # ---- public operations ---------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Ended, or ending: no leg runs again (a cancel waits for the final envelope)."""
        return self.state.ended

    @property
    def status(self) -> CellStatus:
        """The cell's status as a caller sees it, from its phase (and, once done, its final envelope)."""
        phase = self.state.phase
        if phase is Phase.PARKED:
            return CellStatus.WAITING
        if phase is Phase.DONE and self.final is not None and self.final["status"] == "completed":
            return CellStatus.COMPLETED
        return CellStatus.FAILED if self.state.ended else CellStatus.RUNNING

    def park_at_once(self) -> None:
        """Park as soon as the guest blocks on host work, never wait inline (a background cell's legs)."""
        self.state.park_at_once = True

    async def start(self, budget_ms: int) -> Envelope:
        """The exec leg."""
        assert self.worker is not None
        limits = self.spec.limits
        try:
            await self.worker.send(
                run_frame(
                    cell_id=self.id,
                    code=self.spec.code,
                    budget_ms=budget_ms,
                    memory_limit_bytes=limits.memory_limit_bytes,
                    max_output_bytes=limits.max_output_bytes,
                    # Retention needs the whole value; otherwise a bounded prefix is all the host can show.
                    value_capture_bytes=max(limits.max_output_bytes, limits.inbox_bytes)
                    if self._retainer is not None and _interactive(self.spec)
                    else limits.max_output_bytes,
                    config=guest_config(self.context, limits),
                    language=self.spec.language,
                )
            )
        except WorkerGone as exc:
            return await self._end(Failed(exc.message, "host", "runtime_unavailable"), recycle=True)
        self.state.move(Phase.RUNNING)
        return await self._leg(budget_ms)

    async def resume(
        self, budget_ms: int, tool_results: list[dict[str, object]], approvals: list[dict[str, object]] | None = None
    ) -> Envelope:
        """A wait leg: settle caller answers (results, approvals) and yields, then run until the next stop.

        The leg takes its runtime's process when it has replies to deliver; another cell's leg
        running there first is waited for, within this leg's budget (``_leg``).  A cell over its
        ``bounds`` (legs run, lifetime) ends failed instead.
        """
        now = self._clock()
        over = self._bounds.over(self.telemetry.legs, now - self.born)
        if over is not None:  # its answers are dropped with it
            return await self._end(over, recycle=False)
        if self.written_out and self._parked_cells is not None:
            # Before anything of it runs again: a replica taking up the old record would run it twice.
            await self._parked_cells.forget(self.id)
            self.written_out = False
        self.state.move(Phase.AWAITING_HOST)
        self.last_active = now
        self.requests.settle_answers(tool_results, approvals or [])
        return await self._leg(budget_ms)

    def _process_lost(self, reason: str) -> None:
        """The worker process holding our runtime died (crash, or a kill for another cell)."""
        if not self.done:
            self.requests.wake.set()  # a leg waiting for host work notices it at once
            self._lost_task = asyncio.ensure_future(self._lose(reason))  # a parked cell ends here

    async def _lose(self, reason: str) -> None:
        async with self.wait_lock:
            if not self.done:
                await self._lost(f"{reason}; this parked cell's runtime was in that process")

    async def _lost(self, reason: str, clock: LegClock | None = None) -> Envelope:
        """The cell's process died under it.  If the running leg's own ``clock`` killed it, the cell
        overran its deadline: running, or with replies stuck in a pipe its worker stopped reading."""
        if clock is not None and clock.overran:
            return await self._end(Failed(TIMEOUT_MESSAGE, "guest", "timeout"), recycle=True)
        return await self._end(
            Failed(reason + "; the cell was lost, start it again", "host", "runtime_unavailable"), recycle=True
        )

    @property
    def bridge_dispatch_started(self) -> bool:
        return self.requests.side_effects_started

    async def cancel(self, message: str = ABORT_MESSAGE, reason: EndReason = EndReason.CANCELLED) -> Envelope:
        """Abort the cell now; a running leg ends with the same ``aborted`` envelope."""
        state = self.state
        if not self.done:
            state.aborted = message
            self.end_reason = reason
            self._abort_event.set()
            if state.holding and state.phase is Phase.RUNNING and self.worker and self.worker.holds_only(self.id):
                # Stop the guest now; beside other cells' runtimes the leg ends at its next stop.
                self.worker.kill("the cell was cancelled")
            self.requests.wake.set()
        # A running leg notices the abort and ends the cell; a parked cell is ended here.
        async with self.wait_lock:
            if not self.done:  # parked: its runtime is dropped, the process and its other cells stay
                await self._end(Failed(message, "host", "aborted"), recycle=False)
        assert self.final is not None
        return self.final

    async def abandon(self) -> None:
        """End the cell after a service fault in its leg (the caller already holds ``wait_lock``)."""
        if self.worker is not None and self.worker.holds_only(self.id):  # a kill costs no other cell
            self.worker.kill()
        await self._end(
            Failed("the service failed while running this cell; start it again", "host", "runtime_unavailable"),
            recycle=True,
        )

    def snapshot(self) -> Envelope:
        """Status without resuming."""
        if self.final is not None:
            return envelopes.finished_summary(self.final)
        # Until its final envelope exists, a cell that is not parked is still in a leg (maybe in its
        # end-of-cell steps): "running", never an outcome without its error or value.
        waiting = self.state.phase is Phase.PARKED
        return envelopes.status_snapshot(
            self.id,
            status="waiting" if waiting else "running",
            bridge_dispatch_started=self.bridge_dispatch_started,
            replay_safe=self.replay_safe,
            telemetry=self.telemetry.public(0.0, *self.requests.waiting.split(0.0), cell_wall_ms=self._age_ms()),
            reason=self.requests.reason() if waiting else None,
            pending_tool_calls=self.requests.public() if waiting else None,
        )

    @property
    def replay_safe(self) -> bool:
        return self.spec.restart_safe or not self.bridge_dispatch_started

    # ---- the leg loop ----------------------------------------------------------------------------

    async def _leg(self, budget_ms: int) -> Envelope:
        """Apply the rule's steps (``step.py``) until the leg ends: the cell's end, or its park."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_ms / 1000
        margin = min(0.25, max(0.001, budget_ms / 2000))
        self.telemetry.legs += 1
        self._leg_started = time.perf_counter()  # uvloop's loop.time() only has millisecond resolution
        self.requests.waiting.start_leg()
        state = self.state

        def kill_overrun() -> bool:  # at deadline + kill_grace_ms, if our guest still runs (its neighbours fail too)
            if not (
                state.phase is Phase.RUNNING and state.holding and self.worker is not None and not self.worker.dead
            ):
                return False
            self.worker.kill(OVERRUN_MESSAGE)
            return True

        kill_at = deadline + self.spec.limits.kill_grace_ms / 1000
        with LegClock(deadline - margin, kill_at, self.requests.wake.set, kill_overrun) as clock:
            self._leg_times = (clock, deadline)
            try:
                while True:
                    now = loop.time()
                    match next_step(self._view(clock), now):
                        case Step.READ:
                            ended = await self._run_slice(clock)
                            if ended is not None:
                                return ended
                            if self.requests.in_flight:
                                # One turn of the loop lets handlers that finish without waiting (most tool
                                # calls) settle while the leg still holds the process: no hand-back and reacquire.
                                await asyncio.sleep(0)
                        case Step.ABORT:
                            return await self._end(
                                Failed(state.aborted or ABORT_MESSAGE, "host", "aborted"), recycle=False
                            )
                        case Step.LOSE:
                            return await self._lost(await self._exit_reason(), clock)
                        case Step.REACQUIRE:  # lent while waiting: take the process back (after others' slices)
                            assert self.worker is not None
                            try:
                                state.holding = await self.pool.reacquire(
                                    self.worker, self.id, deadline - margin - now, self._abort_event
                                )
                            except WorkerGone as exc:
                                return await self._lost(exc.message)
                        case Step.DELIVER:
                            assert self.worker is not None
                            self._deliver(int((deadline - now) * 1000))
                            # A worker that stops reading holds up this leg, not the service's memory.
                            with contextlib.suppress(WorkerGone):  # the next recv reports how it died
                                await self.worker.drain()
                        case Step.PARK:
                            return await self._park()
                        case Step.WAIT:
                            await self._wait_for_host_work()
            finally:
                self._leg_times = None  # it refers back to this cell: no cycle outlives the leg

    def _view(self, clock: LegClock) -> LegView:
        """What the rule reads of this cell now (``step.LegView``)."""
        state, requests, worker = self.state, self.requests, self.worker
        return LegView(
            running=state.phase is Phase.RUNNING,
            aborted=state.aborted is not None,
            worker_alive=worker is not None and not worker.dead,
            holding=state.holding,
            has_ready=requests.has_ready,
            needs_caller=requests.needs_caller,
            park_at_once=state.park_at_once,
            park_at=clock.park_at,
            due=clock.due,
        )

    async def _wait_for_host_work(self) -> None:
        """Wait for a reply, the caller needed, an abort, a lost process or the leg's park time; other
        cells' legs may run in the process meanwhile (it is lent, with the running slot)."""
        if self.state.holding and self.worker is not None:
            self.state.holding = False
            self.pool.hand_back(self.worker)
        wake = self.requests.wake
        wake.clear()
        await wake.wait()

    async def _exit_reason(self) -> str:
        return "worker process is gone" if self.worker is None else await self.worker.exit_reason()

    async def _run_slice(self, clock: LegClock) -> Envelope | None:
        """Read the worker's next frame for this cell; the final envelope if the cell ended, else None."""
        assert self.worker is not None
        try:
            msg = await self.worker.recv(self._stopped)
        except WorkerGone as exc:
            aborted = self.state.aborted
            if aborted and not clock.overran:  # an overrun is the timeout it was first
                return await self._end(Failed(aborted, "host", "aborted"), recycle=True)
            return await self._lost(exc.message, clock)
        if not _for_runtime(msg, self.id):
            return None  # a late frame of a runtime the host dropped mid-slice
        if msg["t"] == "done":
            return await self._on_done(msg)
        if msg["t"] != "idle":
            self.worker.kill()
            unexpected = f"worker sent an unexpected {msg['t']!r} frame; the cell was lost, start it again"
            return await self._end(Failed(unexpected, "host", "runtime_unavailable"), recycle=True)
        return None

    def _stopped(self, msg: WorkerFrame, may_answer: bool) -> bool:
        """The guest stopped (a frame of this cell's runtime): run as soon as the frame is whole, in the
        worker pipe's read callback (``WorkerOutput``), before the leg runs again.

        It frees the replies delivered with the slice before it and starts the handlers of an idle
        frame's requests: those that finish without waiting have settled by the time the leg runs,
        or by the time they are started where tasks start eagerly (Python 3.12+).  Then, if it
        ``may_answer`` and the rule answers in place (``step.answers_in_place``: deliver, every
        request settled, the pipe empty), the replies are delivered here, and True says the leg need
        not wake.
        """
        if not _for_runtime(msg, self.id):
            return False
        requests = self.requests
        requests.inbox.release(self._delivered_bytes)
        self._delivered_bytes = 0
        if msg["t"] != "idle":
            return False  # the leg reads it: the cell's end, or a frame the protocol has no place for
        self.state.move(Phase.AWAITING_HOST)
        self.output.extend(msg["shipped"])
        self.telemetry.guest_cpu_ms = msg["cpu_ms"]
        self.telemetry.heap_bytes = msg["heap_bytes"]
        for request_id in msg["cancels"]:
            requests.drop(request_id)
        for req in msg["requests"]:
            requests.dispatch(req["id"], req["method"], req.get("args", b"[]"))
        self.telemetry.host_requests = requests.count
        worker, leg = self.worker, self._leg_times
        if not may_answer or worker is None or leg is None:
            return False
        clock, deadline = leg
        now = asyncio.get_running_loop().time()
        if not answers_in_place(self._view(clock), now, settled=not requests.in_flight, pipe_empty=worker.pipe_empty):
            return False
        self._deliver(int((deadline - now) * 1000))
        return True

    def _deliver(self, budget_ms: int) -> None:
        """Hand the ready replies to the worker and let its guest run on (the pipe takes them later if
        it is full: the leg then waits for it, and an answer in place is written only into an empty one)."""
        assert self.worker is not None
        ready, charged = self.requests.take_ready()
        replies = [reply for reply, _ in ready]
        payloads = [raw for _, raw in ready if raw is not None]
        self._delivered_bytes += charged
        try:
            self.worker.write(settle_frame(self.id, max(budget_ms, 1), replies), payloads)
        except WorkerGone:
            pass  # the next recv reports how the worker died
        self.state.move(Phase.RUNNING)

    # ---- stops -----------------------------------------------------------------------------------

    async def _park(self) -> Envelope:
        try:
            await self._json_texts.check_output(self.output, None, self.spec)  # embedded as they are: JSON only
        except InvalidSource as exc:  # an honest worker never: one an attacker owns is let go
            if self.worker is not None:
                self.worker.kill("it sent output that is not JSON")
            return await self._end(Failed(f"{NOT_JSON_MESSAGE} ({exc})", "host", "runtime_unavailable"), recycle=True)
        # A refused park drops only this cell's runtime: others parked in the process stay.
        if self.telemetry.heap_bytes > self.spec.limits.max_snapshot_bytes:
            return await self._end(Failed(SNAPSHOT_MESSAGE, "host", "snapshot_limit_exceeded"), recycle=False)
        if not self._quotas.park(self.id, self.spec.tenant):
            return await self._end(
                Failed(
                    "too many parked cells on this server: the cell could not be parked; retry later "
                    "or use a longer timeout_ms",
                    "host",
                    "runtime_unavailable",
                ),
                recycle=False,
            )
        state = self.state
        if self._parked_cells is not None and not state.park_at_once:
            await self._write_out()
        if self.worker is not None:
            self.pool.park(self.worker, self.id, self.telemetry.heap_bytes, holding=state.holding)
            state.holding = False
        state.move(Phase.PARKED)
        self.last_active = self._clock()
        projection = self.output.project(None)
        envelope = envelopes.waiting(
            self.id,
            output=projection.output,
            reason=self.requests.reason(),
            pending_tool_calls=self.requests.public(),
            **self._common(report=not state.park_at_once, final=False),
        )
        return marked(envelope, self.context)

    async def _on_done(self, msg: DoneFrame) -> Envelope:
        self.state.runtime_gone = True  # the worker forgot it when it sent this frame
        self.output.extend(msg["shipped"])
        self.telemetry.guest_cpu_ms = msg["cpu_ms"]
        self.telemetry.heap_bytes = msg["heap_bytes"]
        for request_id in msg["cancels"]:
            self.requests.drop(request_id)
        if msg["ok"]:
            return await self._end(Completed(received_value(msg["value"], msg["text"])), recycle=msg["recycle"])
        err = msg["error"]
        return await self._end(Failed(msg["text"], err["phase"], err["code"]), recycle=msg["recycle"])

    async def _end(self, outcome: Outcome, *, recycle: bool) -> Envelope:
        """End the cell: free what it holds, then seal its final envelope (``ending.py``)."""
        state = self.state
        state.move(Phase.ENDING)  # a cancel from here on waits for this envelope
        self.end_reason = self.end_reason or EndReason.FINISHED
        if self.written_out and self._parked_cells is not None:  # ended while parked (cancel, expiry)
            self.written_out = False
            await self._parked_cells.forget(self.id, quiet=True)
        self.requests.close()
        if self.worker is not None:
            self.pool.release(
                self.worker,
                recycle=recycle or self.worker.dead,
                cell_id=self.id,
                holding=state.holding,
                drop=not state.runtime_gone,
            )
            state.holding = False
            self.worker = None
        retention = None
        if isinstance(outcome, Completed) and self._retainer is not None and _interactive(self.spec):
            retention = Retention(self._retainer, self.context, outcome.value_source)
        sealed = await FinalEnvelope(self.context, self.output, self._common, retention, self._json_texts).seal(
            outcome, self.dispatcher.finalizers
        )
        self.final = sealed
        state.move(Phase.DONE)
        if not self.ended.done():
            self.ended.set_result(None)
        return sealed

    def _common(self, *, report: bool = True, final: bool = True) -> LegFields:
        """The fields every leg's envelope carries, as of now (``report``: a caller is shown them; ``final``:
        the cell's last envelope, which a background cell's call log waits for: its other legs' are not shown)."""
        started = self.bridge_dispatch_started if report else self.requests.side_effects_may_have_started()
        wall_ms = (time.perf_counter() - self._leg_started) * 1000
        log = self.requests.log
        return {
            "bridge_dispatch_started": started,
            "replay_safe": self.spec.restart_safe or not started,
            "telemetry": self.telemetry.public(
                wall_ms,
                *self.requests.waiting.split(wall_ms),
                cell_wall_ms=self._age_ms(),
                call_log=log.take() if log is not None and (final or not self.spec.background) else None,
            ),
        }

    def _age_ms(self) -> float:
        """Wall time since the cell's exec, parked time included."""
        return (time.perf_counter() - self._born_at) * 1000


def _interactive(spec: CellSpec) -> bool:
    """Whether an oversized final object/array is saved as a reference (given a retainer): interactive cells."""
    return not spec.headless and not spec.restart_safe


async def guarded(
    cell: Cell,
    leg: Awaitable[Envelope],
    tracing: Tracing,
    trace_parent: TraceParent = None,
    started_ns: int | None = None,
) -> Envelope:
    """Run a leg (traced as a child of ``trace_parent``); if the service itself fails mid-leg, the cell
    ends instead of leaking its worker."""
    try:
        if tracing.enabled:
            leg = tracing.traced_leg(cell, leg, trace_parent, started_ns)
        return await leg
    except BaseException:
        if not cell.done:
            await cell.abandon()
        raise


def _for_runtime(msg: WorkerFrame, rt: str) -> bool:
    """Whether a worker's frame is runtime ``rt``'s (a ready frame names none and counts as anyone's)."""
    return msg["t"] == "ready" or msg["rt"] == rt
