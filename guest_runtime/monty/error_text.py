"""How a Python cell's failures read: Monty's exceptions and frames as the error text a caller sees.

Duck-typed (``Frame`` below is what the text reads of Monty's ``Frame``), so it needs no Monty import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from bridge.messages import Phase

from ..engine import MAX_ERROR_FRAMES
from ..errors import UNCAUGHT_ERROR, EngineFault, GuestRuntimeError, GuestTimeout

SCRIPT = "cell.py"
#: Monty's own time limits; it prints durations in the unit that fits (``500ms``, ``1.5s``).
_TIMEOUT = re.compile(
    r"^TimeoutError: (?:turn |feed )?time limit exceeded: [0-9.]+(?:ns|µs|ms|s) > [0-9.]+(?:ns|µs|ms|s)$"
)
_OUT_OF_MEMORY = re.compile(r"^MemoryError: (?:memory limit exceeded: |the worker exceeded its memory limit)")


class Frame(Protocol):
    """One frame of a Monty traceback, as far as the error text reads it."""

    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def function_name(self) -> str | None: ...
    @property
    def source_line(self) -> str | None: ...


def uncaught(text: str) -> tuple[str, Phase, str]:
    return text, "guest", UNCAUGHT_ERROR


def limit_error(head: str) -> GuestRuntimeError | None:
    """What ends the cell when an exception head is one of Monty's limits: its time (a timeout) or its memory
    (an EngineFault the worker reports as memory_limit_exceeded); None for any other exception."""
    if _TIMEOUT.match(head):
        return GuestTimeout("cell timeout exceeded")
    if _OUT_OF_MEMORY.match(head):
        return EngineFault(f"out of memory: {head}")
    return None


def described(exc: BaseException) -> str:
    """``Kind: message`` of a host exception, short enough for an error text."""
    return f"{type(exc).__name__}: {exc}"[:300]


def error_head(exc: BaseException) -> str:
    """The last line of Monty's ``Kind: message`` for ``exc``."""
    display = getattr(exc, "display", None)
    text = display("type-msg") if display is not None else str(exc)
    return str(text).strip().split("\n")[-1] or "Exception"


def frames_of(exc: BaseException) -> list[Frame]:
    traceback = getattr(exc, "traceback", None)
    return list(traceback()) if traceback is not None else []


def error_text(head: str, frames: Sequence[Frame]) -> str:
    """``Name: message`` first, then the cell's own frames (innermost last, as Python prints them)."""
    # Monty names a fed cell's frames ``<python-input-0>``; a cell has no other file, so each is the cell's.
    lines = [head]
    for f in frames[-MAX_ERROR_FRAMES:]:
        lines.append(f'  File "{SCRIPT}", line {f.line}, column {f.column}, in {f.function_name or "<module>"}')
        if f.source_line:
            lines.append("    " + f.source_line.strip()[:200])
    return "\n".join(lines)


def syntax_text(head: str, frames: Sequence[Frame]) -> str:
    name, _, message = head.strip().split("\n")[-1].partition(": ")
    line, col = (frames[-1].line, frames[-1].column) if frames else (1, 1)
    return (
        f"{name or 'SyntaxError'} at {SCRIPT}:{line}:{col}: {message or head}. "
        "No tools were dispatched; correct the Python source and submit it again."
    )
