"""The engine contract: what the worker's driver (``worker.py``) asks of a guest language's engine.

An engine runs one cell in this process: QuickJS runs JavaScript and TypeScript (``quickjs/``), Monty
runs Python (``monty/``).  The driver holds an ``Engine`` and knows nothing else of either: it never
asks which one it holds.

A *slice* is one run of guest code until the cell waits on host work, ends or fails: ``start`` runs the
first, ``resume`` (the host's replies settled first) each later one.  A slice answers with what happened,
as a value the driver reads as it is:

* ``Waiting``: the cell waits on host work; it started ``requests`` (their arguments are read one at
  a time with ``request_args``, as text: they cross to the host as the guest wrote them);
* ``Returned``: the cell returned; ``final_value`` copies its value out;
* ``Failed``: the cell ended in a failure of its own (its error, a stall, a host rejection nobody
  caught), told as the envelope tells it.  A guest failure is data, not an exception.

Every outcome carries the output the cell made during the slice (each entry one JSON text) and the
ids of requests it no longer awaits.  An engine raises only when the engine itself must be thrown
away (``errors.py``): ``GuestSyntaxError`` from ``compile``; ``GuestTimeout``, ``GuestFault`` and
``EngineFault`` from any call that runs guest code.

A waiting cell may be dumped to bytes and restored in another engine (``dump``, ``restore``): Monty can,
QuickJS cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bridge.messages import GuestRequest, Phase

from .errors import STALLED, UNCAUGHT_ERROR

#: The cell's own frames a ``Failed`` text shows at most, in either language.
MAX_ERROR_FRAMES = 10

#: One host reply for a request of the cell: (request id, ok, the reply's JSON text, or the JSON text of
#: its ``ReplyError`` when not ok).
SettledReply = tuple[int, bool, str]

STALLED_TEXT = (
    "cell is pending without host work: its promise can never settle because nothing it awaits "
    "is a tool call, timer or yield_control. Resolve your own promises or await host work."
)


@dataclass(slots=True)
class Waiting:
    """The cell waits on host work.  The lists are handed over: the engine keeps no reference to them."""

    requests: list[GuestRequest]  # started since the last slice, in order (``request_args(i)`` is the i-th's)
    cancels: list[int]  # ids of requests the cell no longer awaits (cleared timers)
    outstanding: int  # host requests the cell still has pending, these included
    output: list[str]


@dataclass(slots=True)
class Returned:
    """The cell returned a value (``Engine.final_value`` copies it out)."""

    cancels: list[int]
    output: list[str]


@dataclass(slots=True)
class Failed:
    """The cell ended in a failure of its own: the envelope's text, phase and code."""

    text: str  # ``Name: message``, then at most MAX_ERROR_FRAMES of the cell's own frames, in its own lines
    phase: Phase
    code: str
    cancels: list[int]
    output: list[str]


#: What one slice of a cell came to.  The outcomes are read, never changed; they are not frozen dataclasses
#: because a frozen one costs about 7,000 instructions more to make, 4% of a tool call's whole slice.
Slice = Waiting | Returned | Failed


class Engine(Protocol):
    """One cell's engine, fresh for that cell and closed after it."""

    def prepare(self, config_json: str) -> None:
        """Build the guest's globals for ``config_json`` ahead of any cell (the worker calls it while idle)."""

    def prepared_for(self, config_json: str) -> bool:
        """Whether ``configure(config_json, ...)`` can use this unused engine."""

    def configure(self, config_json: str, memory_limit_bytes: int) -> None:
        """Build the guest's globals for this cell's configuration and cap its heap."""

    def compile(self, code: str, budget_s: float) -> None:
        """Parse the cell; nothing of it runs.  A syntax error raises ``GuestSyntaxError`` in cell terms."""

    def start(self, deadline: float) -> Slice:
        """Run the compiled cell's first slice, never past ``deadline`` (``time.monotonic``)."""

    def resume(self, replies: Sequence[SettledReply], deadline: float) -> Slice:
        """Settle ``replies`` (unknown or no longer awaited ids are ignored), then run the next slice."""

    def request_args(self, index: int) -> str:
        """The JSON argument text of request ``index`` of the last ``Waiting`` (each is handed over once)."""

    def final_value(self, headroom_bytes: int, deadline: float) -> str:
        """JSON text of a ``Returned`` cell's value; the copy may take ``headroom_bytes`` over the heap cap.

        A value with no JSON form raises ``GuestFault`` (the cell's own failure).
        """

    def heap_bytes(self) -> int:
        """The bytes this cell holds in the engine: what its memory limit counts."""

    def dump(self) -> bytes:
        """The state of a cell that waits on host work, as bytes ``restore`` takes up in a fresh engine of the
        same build (another process, another machine): what a parked cell needs to outlive its process.

        An engine that cannot (QuickJS: a runtime's heap is not serialisable) raises ``EngineFault``.
        """

    def restore(self, state: bytes) -> int:
        """Take up, in this configured engine, the cell ``state`` (from ``dump``) holds; it waits on the host
        requests it awaited when dumped, and this answers how many.  Bytes that are not such a state raise
        ``EngineFault`` (the host only hands back bytes it sealed, of this cell and principal).
        """

    def close(self) -> None:
        """Forget the cell; what the engine holds is freed with it."""


def stalled(cancels: list[int], output: list[str]) -> Failed:
    """A cell that waits on nothing the host can settle (no tool call, timer or yield is pending)."""
    return Failed(STALLED_TEXT, "guest", STALLED, cancels, output)


def bridge_failure_code(host_code: str) -> str:
    """The code of a cell ended by a host request's rejection nobody caught (phase ``bridge``).

    An input-contract rejection keeps its code; any other host failure is the cell's uncaught error.
    """
    return "invalid_input" if host_code in ("invalid_input", "input_contract") else UNCAUGHT_ERROR
