"""A Python cell's source as its Monty child runs it: the cell's value written as JSON in the child.

Monty hands a finished cell's value to the worker by copying every object across the pipe and building
Python objects of them: ~70 ms for a 1 MiB list of dicts, where the child's own ``json.dumps`` of it
takes ~10 ms and the text crosses in ~2.  So the cell's last statement, when it is an expression, is
assigned to a name, and a few lines appended write that value as JSON in the child.  The cell's value is
then that text, or None when ``json.dumps`` refused the value (a handle, a set, NaN, a circular list): the
worker takes the text only if the host would write the same JSON (``values.child_text``), and otherwise
reads the value itself (``Rewrite.FETCH``, one more turn of the child) and converts it as before.

Only the last statement's first line changes (the name and `` = `` in front of it), so every other line
and column the guest sees in a traceback is its own; ``Rewrite.frames`` undoes that one shift.  The text
counts against the cell's memory limit, as a JavaScript cell's ``JSON.stringify`` does.

The statement is found by the C scan (``source_scan.c``: the line the last top-level logical line starts
on, ~3 ms per MiB) and CPython's parser, which reads only from that line on: parsing the whole cell would
cost ~0.4 ms per KiB of code, more than Monty takes to run a small cell.  Without the extension (no C
compiler at install), and wherever the scan is not sure, the cell runs as written.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from .error_text import Frame

try:
    from . import _source_scan
except ImportError:  # the optional extension was not built (pyproject.toml: ext-modules)
    _source_scan = None  # type: ignore[assignment]

VALUE_NAME = "__codemode_value__"
_TEXT_NAME = "__codemode_text__"
PREFIX = f"{VALUE_NAME} = "
#: A bare ``except``: a cell may have rebound ``Exception``; Monty's limits (memory, time) are not
#: catchable, so they still end the cell.
SUFFIX = f"""
try:
    import json as __codemode_json__
    {_TEXT_NAME} = __codemode_json__.dumps({VALUE_NAME}, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
except:
    {_TEXT_NAME} = None
{_TEXT_NAME}
"""
#: A last statement longer than this runs as written: parsing it costs the worker ~0.4 ms per KiB.
MAX_STATEMENT_CHARS = 16 * 1024
#: A compound statement: what follows it on its line is its body, never a top-level expression.
_COMPOUND = re.compile(r"(?:if|for|while|with|try|def|class|async)\b|@")


@dataclass(frozen=True)
class Rewrite:
    """Where the prefix went: the 1-based line and column (in characters) the cell's last statement starts."""

    line: int
    column: int

    #: What the worker feeds to read the value when it needs the object after all.
    FETCH = VALUE_NAME

    def frames(self, frames: Sequence[Frame]) -> list[Frame]:
        """``frames`` with the positions and source line the guest wrote (the prefix taken out)."""
        return [self._unshifted(f) if f.line == self.line else f for f in frames]

    def _unshifted(self, frame: Frame) -> Frame:
        column = frame.column - len(PREFIX) if frame.column >= self.column + len(PREFIX) else frame.column
        source = frame.source_line
        start = self.column - 1
        if source is not None and source[start : start + len(PREFIX)] == PREFIX:
            source = source[:start] + source[start + len(PREFIX) :]
        return _Frame(frame.line, column, frame.function_name, source)

    def export(self) -> list[int]:
        return [self.line, self.column]

    @classmethod
    def restored(cls, state: object) -> Rewrite | None:
        """Take up what ``export`` wrote (None: the cell ran as written); ``ValueError`` if out of shape."""
        if state is None:
            return None
        if not (isinstance(state, list) and len(state) == 2 and all(type(n) is int and n > 0 for n in state)):
            raise ValueError("the cell's source position is out of shape")
        return cls(state[0], state[1])


@dataclass(frozen=True)
class _Frame:
    line: int
    column: int
    function_name: str | None
    source_line: str | None


def rewritten(code: str) -> tuple[str, Rewrite] | None:
    """The source to run so that the child writes the cell's value as JSON, or None: run ``code`` as it is
    (its last statement is no expression, or too long, the scan is not sure of it, or CPython does not parse
    it: Monty then names the fault itself)."""
    found = _last_line(code)
    if found is None:
        return None
    first, begin = found
    tail = code[begin:]
    if len(tail) > MAX_STATEMENT_CHARS or _COMPOUND.match(tail):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape is Monty's to judge, not a line on stderr
            tree = ast.parse(tail)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr) or _scalar(last.value):
        return None
    start = _line_start(tail, last.lineno)
    # A statement's column is counted in UTF-8 bytes, the traceback's in characters (never more of them).
    before = tail[start : start + last.col_offset].encode("utf-8", "surrogatepass")[: last.col_offset]
    column = len(before.decode("utf-8", "replace"))
    at = begin + start + column
    return code[:at] + PREFIX + code[at:] + SUFFIX, Rewrite(first + last.lineno - 1, column + 1)


def _scalar(value: ast.expr) -> bool:
    """Whether the expression makes a str, a number, a bool or None by its syntax (a literal, an f-string, a
    comparison, a ``not``): Monty hands such a value over as cheaply as its text, and the appended lines would
    cost the child ~0.1 ms of CPU for nothing (a rich comparison may make something else: then only slower)."""
    return isinstance(value, (ast.Constant, ast.JoinedStr, ast.Compare)) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    )


def _last_line(code: str) -> tuple[int, int] | None:
    """(line, index) where the cell's last top-level logical line starts, or None (no extension, not sure,
    none)."""
    if _source_scan is None:
        return None
    try:
        line, index = _source_scan.last_top_level_line(code)
    except UnicodeEncodeError:  # a lone surrogate: not Python source Monty would take either
        return None
    return (line, index) if line > 0 else None


def _line_start(code: str, lineno: int) -> int:
    """The index in ``code`` (a last statement, at most MAX_STATEMENT_CHARS) where its line ``lineno``
    (1-based) starts; the scan refused a lone carriage return, so every line ends in "\n"."""
    at = 0
    for _ in range(lineno - 1):
        at = code.index("\n", at) + 1
    return at
