"""The prelude's plain-data check in C (``plain_data.c``, built as ``_plain_data``), and its wiring.

Before the prelude hands a value to the engine's ``JSON.stringify`` it proves the value is plain data
(``prelude/serialise.js``).  Where the extension was built, that proof runs in C: ``engine.py`` binds
it to the engine's C API once per process and installs it into each new context under ``SLOT``, a
global the prelude's script reads and deletes before any cell code runs.  The walk only ever answers
"plain, N values" or "ask the prelude", so without it (a machine with no C compiler when the service
was installed) every value takes the prelude's own walk: same answers, ~30x slower on large values.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from bridge.jsoncodec import MAX_NESTING

try:
    from . import _plain_data
except ImportError:  # the optional extension was not built (pyproject.toml: ext-modules)
    _plain_data = None  # type: ignore[assignment]

#: The global the check is parked under until the prelude's script has read it.
SLOT = "__codemode_plain_" + os.urandom(8).hex()

#: The engine's C functions the walk calls, in the order ``plain_data.c``'s table lists them.
API = (
    "JS_GetOwnPropertyNames",
    "JS_GetOwnProperty",
    "JS_FreePropertyEnum",
    "JS_GetPrototype",
    "JS_GetClassID",
    "JS_GetLength",
    "JS_FreeValue",
    "JS_NewAtom",
    "JS_FreeAtom",
    "JS_GetException",
    "JS_NewCFunction2",
    "JS_GetGlobalObject",
    "JS_SetPropertyStr",
    "JS_ToCStringLen2",
    "JS_FreeCString",
    "JS_AtomToCStringLen",
    "JS_NewStringLen",
    "JS_NewAtomUInt32",
)

#: Expressions and what the check answers for each (the values it visits, or -1: ask the prelude),
#: evaluated at worker start: a layout or calling convention that does not match fails loudly.
PROOF = (
    ("[1, [2, {a: 'x', b: null}], 3]", 8),
    ("[1, , 3]", 4),
    ("({a: {b: {c: [true]}}})", 5),
    ("({get a() { return 1; }})", -1),
    ("({toJSON() { return 1; }})", -1),
    ("[1n]", -1),
    ("new Proxy({}, {})", -1),
    ("(() => { const a = []; a.push(a); return a; })()", -1),
)
#: The same, asked to write the value: its JSON text, or -1.
PROOF_TEXT = (
    (
        "[1, [2.5, {a: 'x\\n\\ud800', b: null, c: undefined}], -0, 2 ** 53]",
        '[1,[2.5,{"a":"x\\n\\ud800","b":null}],0,9007199254740992]',
    ),
    ("[1, , 3]", -1),
    ("({get a() { return 1; }})", -1),
)


def built() -> bool:
    """Whether the extension is there (it is optional: building it needs a C compiler)."""
    return _plain_data is not None


def bind(address_of: Callable[[str], int]) -> None:
    """Hand the extension the engine's functions (``address_of(name)``); a no-op without it."""
    if _plain_data is not None:
        _plain_data.bind(tuple(address_of(name) for name in API))


def install(context: int) -> bool:
    """Put the check on the global object of the context at address ``context``; False without it."""
    if _plain_data is None:
        return False
    _plain_data.install(context, SLOT)
    return True


def call(expression: str, *, write: bool = False) -> str:
    """JavaScript that asks the installed check about ``expression`` (for its text, with ``write``), in the
    calling convention of ``plain_data.c``: no enclosing arrays, the realm's prototypes, the nesting cap."""
    last = ", true" if write else ""
    return f"globalThis.{SLOT}({expression}, 0, Object.prototype, Array.prototype, {MAX_NESTING}{last})"


def prove(context: int, evaluate: Callable[[str], object]) -> str | None:
    """Install the check into the fresh context at ``context`` and ask it ``PROOF`` through ``evaluate``
    (that context's eval): the first wrong answer, said, or None (also when the check was not built)."""
    if not install(context):
        return None
    for table, write in ((PROOF, False), (PROOF_TEXT, True)):
        for expression, expected in table:
            answer = evaluate(call(expression, write=write))
            if answer != expected:
                return f"the C plain-data check answered {answer!r} for {expression} (write: {write}), not {expected!r}"
    return None
