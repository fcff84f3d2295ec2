"""The one rule for what a cell's leg does next, as a pure function of what it sees.

Both places that decide use it: the leg itself (``Cell._leg``, between its awaits) and the worker
pipe's read callback, which may answer a guest in place as soon as its frame is whole
(``Cell._stopped``).  The rule in order:

1. the guest runs: read the worker's next frame;
2. the host ended the cell (cancel, expiry): end it, aborted;
3. its worker process is gone: end it, lost;
4. replies are ready and the leg's park time has not come: deliver them, taking the process back
   first if the leg lent it while it waited;
5. the caller is needed (a client tool, an approval, a yield), the park time came, or the cell parks
   as soon as it blocks (a background cell): park;
6. otherwise wait for host work, lending the process (and the running slot) meanwhile.

An answer in place is step 4 with the process held, when every request of the frame has settled,
the pipe has room (nothing written before still waits), and the read may be answered at all (only
the first message of a read: ``WorkerOutput``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Step(enum.Enum):
    READ = "read"
    ABORT = "abort"
    LOSE = "lose"
    REACQUIRE = "reacquire"
    DELIVER = "deliver"
    PARK = "park"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class LegView:
    """What the rule reads of a cell in a leg, as of one moment."""

    running: bool  # its guest runs in the worker
    aborted: bool  # the host ended it
    worker_alive: bool
    holding: bool  # the leg holds the process and a running slot
    has_ready: bool  # replies ready to deliver
    needs_caller: bool  # a request only the API caller can answer
    park_at_once: bool  # a background cell
    park_at: float  # event-loop time the leg parks at
    due: bool  # the park timer already fired


def next_step(view: LegView, now: float) -> Step:
    """What the leg does next at event-loop time ``now``."""
    if view.running:
        return Step.READ
    if view.aborted:
        return Step.ABORT
    if not view.worker_alive:
        return Step.LOSE
    due = view.due or now >= view.park_at
    if view.has_ready and not due:
        return Step.DELIVER if view.holding else Step.REACQUIRE
    if view.needs_caller or due or view.park_at_once:
        return Step.PARK
    return Step.WAIT


def answers_in_place(view: LegView, now: float, *, settled: bool, pipe_empty: bool) -> bool:
    """Whether the read callback delivers the replies itself: the rule says deliver, every request of
    the frame settled, and the pipe took all that was written before."""
    return settled and pipe_empty and next_step(view, now) is Step.DELIVER
