"""Where a cell is in its life: one phase at a time, moved only along the edges drawn here.

    STARTING ──> RUNNING <──> AWAITING_HOST ──> PARKED
        │           │              │   ^          │
        │           │              │   └──────────┘  (a wait or a background cell's next leg)
        └───────────┴──────────────┴──────────────┴──> ENDING ──> DONE

``RUNNING``: its guest runs in the worker and the leg reads the worker's next frame.
``AWAITING_HOST``: its guest is blocked on host work, within a leg (the leg delivers replies, waits,
or parks).  ``PARKED``: between legs; its runtime stays in the worker.  ``ENDING``: its final envelope
is being built; ``DONE``: it is built.  Moving along an edge not drawn raises ``IllegalTransition``.

Beside its phase a cell's state says whether its leg *holds* its worker process (and a running slot),
why the host ended it (an abort, once asked), whether the worker already forgot its runtime, and
whether it parks as soon as it blocks (a background cell).  What to do next is not decided here but
by one rule over this state (``step.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from service.errors import IllegalTransition


class Phase(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    AWAITING_HOST = "awaiting_host"
    PARKED = "parked"
    ENDING = "ending"
    DONE = "done"


_EDGES: dict[Phase, frozenset[Phase]] = {
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.ENDING}),
    Phase.RUNNING: frozenset({Phase.AWAITING_HOST, Phase.ENDING}),
    Phase.AWAITING_HOST: frozenset({Phase.RUNNING, Phase.PARKED, Phase.ENDING}),
    Phase.PARKED: frozenset({Phase.AWAITING_HOST, Phase.ENDING}),
    Phase.ENDING: frozenset({Phase.DONE}),
    Phase.DONE: frozenset(),
}


@dataclass(slots=True)
class CellState:
    """One cell's phase and the facts beside it; ``move`` is the only way to change the phase."""

    phase: Phase = Phase.STARTING
    holding: bool = True  # its leg holds the worker process and a running slot (a new cell's first leg does)
    aborted: str | None = None  # why the host ended it (cancel, expiry), once asked
    runtime_gone: bool = False  # the worker forgot its runtime (it reported the cell's end)
    park_at_once: bool = False  # it parks as soon as it blocks on host work (a background cell)

    def move(self, to: Phase) -> None:
        if to not in _EDGES[self.phase]:
            raise IllegalTransition(f"a cell cannot go from {self.phase.value} to {to.value}")
        self.phase = to

    @property
    def ended(self) -> bool:
        """Ending or done: no leg runs again, and a cancel waits for the final envelope."""
        return self.phase in (Phase.ENDING, Phase.DONE)


def edges() -> dict[Phase, frozenset[Phase]]:
    """The legal moves (for the tests and the architecture page)."""
    return dict(_EDGES)
