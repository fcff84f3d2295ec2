"""Cell stack traces: the engine's error texts with the cell's own frames, renumbered to cell lines.

The driver compiles a cell as the body of an async function, so the engine numbers its lines from
that wrapper; prelude frames have no file name (its bytecode is stripped) and never match.
"""

from __future__ import annotations

import re

from ..engine import MAX_ERROR_FRAMES
from ..errors import GuestSyntaxError

#: Lines the AsyncFunction constructor puts before the body: "(async function anonymous(\n) {\n".
_BODY_LINE_OFFSET = 2
_FRAME = re.compile(r"^\s*at (?:(?P<fn>[^\s(]+) )?\(?<input>:(?P<line>\d+):(?P<col>\d+)\)?\s*$")
_SYNTAX_AT = re.compile(r"^\s*at <input>:(?P<line>\d+):(?P<col>\d+)")


def first_line(text: str) -> str:
    """The first line of an engine error text (its ``Name: message``)."""
    return text.strip().split("\n", 1)[0]


def syntax_error(text: str) -> GuestSyntaxError:
    """The cell's syntax error, with its position in the cell's own lines."""
    lines = text.strip().split("\n")
    head = lines[0]
    name, _, message = head.partition(": ")
    line, col = 1, 1
    for frame in lines[1:]:
        m = _SYNTAX_AT.match(frame)
        if m:
            line = max(int(m.group("line")) - _BODY_LINE_OFFSET, 1)
            col = int(m.group("col"))
            break
    return GuestSyntaxError(
        f"{name or 'SyntaxError'} at cell.js:{line}:{col}: {message or head}. "
        "No tools were dispatched; correct the JavaScript source and submit it again."
    )


def map_stack(text: str) -> str:
    """Keep ``Name: message`` and the frames of the cell's own code, renumbered to cell lines."""
    lines = text.split("\n")
    head = [lines[0]]
    frames: list[str] = []
    for raw in lines[1:]:
        m = _FRAME.match(raw)
        if m is None:
            if raw.strip() and not raw.strip().startswith("at "):
                head.append(raw)  # multi-line messages stay whole
            continue
        line = int(m.group("line"))
        if line <= _BODY_LINE_OFFSET:
            continue  # the wrapper (prelude frames have no file name, so they never match)
        fn = m.group("fn")
        where = f"cell.js:{line - _BODY_LINE_OFFSET}:{m.group('col')}"
        frames.append(f"    at {fn} ({where})" if fn and fn != "anonymous" else f"    at {where}")
        if len(frames) >= MAX_ERROR_FRAMES:
            break
    return "\n".join(head + frames)
