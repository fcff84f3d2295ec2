"""The guest prelude's source: the ``prelude/*.js`` files joined into the one function the driver compiles.

The files are one function body split by concern; they share its scope, so a file uses what an
earlier file declares without any import machinery.  The function takes the name of the global the
driver parks its value, the host hook, under (the hook deletes that global at its first call), and
the driver's compiled script calls it once.  ``hook.js`` declares the hook, ``codemodeHostHook``, and
the closing lines return it: every file is then a plain script, which is how ``tsc`` checks them
together (``prelude/jsconfig.json``, with ``prelude/scope.d.ts`` declaring the wrapper's parameter).
They are joined line for line (a file keeps every line, comments and strings untouched), each
followed by a line holding only ``;`` so that a statement cannot run on into the next file.
Nothing here runs JavaScript: the driver compiles the text and uses ``locate`` to name the file
and line of a syntax error.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

#: The prelude's files, in the order their top-level statements run.
FILES = (
    "guest_config.js",  # the caps' type and defaults and the fixed limits, generated from guest_config.py
    "core.js",  # captured built-ins, list helpers
    "stack_traces.js",  # call sites without functions for Error.prepareStackTrace
    "state.js",  # the guest side of the host queue
    "serialise.js",  # guest values to JSON text, lenient and strict
    "output.js",  # text(), json(), console
    "requests.js",  # bridge requests and their settlement
    "timers.js",  # setTimeout, clearTimeout, yield_control
    "namespaces.js",  # tools, catalog, MCP, API, results, store
    "text_codec.js",  # TextEncoder, TextDecoder
    "hook.js",  # globals, the cell's outcome, the host hook
)

_HEAD = '(function (/** @type {string | null} */ hookSlot, /** @type {NativePlainCheck | undefined} */ nativePlain) {\n"use strict";\n'
_SEPARATOR = ";\n"  # on a line of its own, after each file
_TAIL = "return codemodeHostHook;\n})"


@dataclass(frozen=True)
class PreludeSource:
    """The function expression's text, and where each file starts in it."""

    text: str
    #: 1-based line of ``text`` where each file's first line is, ascending, with the file name.
    starts: tuple[tuple[int, str], ...]

    def locate(self, line: int) -> str:
        """``file.js:N`` for line ``line`` of ``text`` (the wrapper's own lines name the closure)."""
        index = bisect.bisect_right([start for start, _ in self.starts], line) - 1
        if index < 0:
            return f"<prelude closure>:{line}"
        start, name = self.starts[index]
        return f"{name}:{line - start + 1}"


def folder() -> Traversable:
    """The installed ``prelude/`` folder of this package."""
    return resources.files(__package__).joinpath("prelude")


def load(source_folder: Traversable | None = None, names: Sequence[str] = FILES) -> PreludeSource:
    """Join ``names`` from ``source_folder`` (default: the shipped prelude) into one function expression."""
    where = folder() if source_folder is None else source_folder
    pieces = [_HEAD]
    starts: list[tuple[int, str]] = []
    line = 1 + _HEAD.count("\n")
    for name in names:
        body = where.joinpath(name).read_text(encoding="utf-8")
        if not body.endswith("\n"):
            body += "\n"  # a last-line comment must not swallow the separator
        starts.append((line, name))
        pieces += [body, _SEPARATOR]
        line += body.count("\n") + 1
    pieces.append(_TAIL)
    return PreludeSource("".join(pieces), tuple(starts))
