"""The plain-data check in C (``guest_runtime/quickjs/plain_data.c``) against the prelude's own walk.

Every case runs the same cell in two real engines, one with the C check installed and one without (the
prelude's ``isPlain`` alone, as on a machine where the extension was not built), and asserts that the
two hand the host the same text: as the cell's value, and as a host request's arguments (the strict
mode, which refuses what is not JSON).  Values that are plain data are also counted: both engines
refuse a request at one value over its cap and send it at the cap, so the C walk counts as ``isPlain``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bridge import jsoncodec
from guest_runtime.quickjs import plain_check
from guest_runtime.quickjs.engine import GuestEngine

MiB = 1024 * 1024
STRICT = "try {{ await results.save({value}); return 'saved' }} catch (e) {{ return e.name + ': ' + e.message }}"

#: Values the C walk must leave to the prelude, or take only where the prelude would.
ODD = [
    "({get a() { return 1 }})",
    "Object.defineProperty({b: 2}, 'a', {get() { throw new Error('ran') }, enumerable: false})",
    "({toJSON() { return 'own' }})",
    "Object.defineProperty({a: 1}, 'toJSON', {value: () => 'hidden', enumerable: false})",
    "({toJSON: 5, a: 1})",
    "(() => { Object.prototype.toJSON = function () { return 'patched' }; return {a: [1]} })()",
    "(() => { Object.defineProperty(Array.prototype, 'toJSON', {get() { return () => 'g' }, configurable: true});"
    " return [1] })()",
    "(() => { Object.setPrototypeOf(Array.prototype, null); return [1, {a: 2}] })()",
    "new Proxy({a: 1}, {})",
    "[new Proxy([1], {ownKeys() { throw new Error('trap') }})]",
    "new (class Point { constructor() { this.x = 1 } })()",
    "Object.create({inherited: 1})",
    "new (class Stamp { toJSON() { return 'stamped' } })()",
    "[Object.create({toJSON() { return 'inherited' }})]",
    "Object.assign(Object.create(null), {a: 1, b: [null]})",
    "Object.setPrototypeOf([1, 2], null)",
    "Object.setPrototypeOf({a: 1}, Array.prototype)",
    "(function () { return arguments })(1, 2)",
    "[new Date(0), new Map([[1, 2]]), new Set([1]), new Uint8Array(3), /re/g]",
    "[() => 1, {f() {}}, Math.max]",
    "[1n]",
    "({a: 2n})",
    "[Symbol('s'), {s: Symbol('t')}]",
    "[Promise.resolve(1)]",
    "({e: new TypeError('t'), f: new Error('boom')})",
    "(() => { const a = {n: 1}; a.self = a; return a })()",
    "(() => { const a = [1]; a.push([a]); return a })()",
    "(() => { const x = {a: 1}; return [x, x, [x]] })()",
    "(() => { const a = [1]; a[5] = 2; return a })()",
    "(() => { const a = [1, 2]; a.extra = {b: 3}; return a })()",
    "Object.freeze({a: [1, {b: 'c'}]})",
    "['\\ud800', {'\\udfff': 'x\\udc00'}]",
    "[undefined, {u: undefined}, NaN, Infinity, -0]",
    "(() => { let v = 1; for (let i = 0; i < 199; i++) v = [v]; return v })()",
    "(() => { let v = 1; for (let i = 0; i < 200; i++) v = [v]; return v })()",
    "(() => { let v = 1; for (let i = 0; i < 201; i++) v = {v}; return v })()",
    "(() => { globalThis.visible = [1]; return globalThis })()",
    "Object.defineProperty([1, 2], 0, {value: 'hidden', enumerable: false})",
    "(() => { const a = [1]; Object.defineProperty(a, 'g', {get() { throw new Error('ran') }, enumerable: true});"
    " return a })()",
    "({b: 1, 2: 2, a: 3, 1: 4, '-1': 5, 4294967295: 6, 4294967294: 7, '01': 8})",
    "['\\u2028\\u2029\\x7f\\x00\\x1f', '\\ud83d\\ude00', '\\ude00\\ud83d', {'\\n\\\\\\\"': '\\t'}]",
    "[0.1, -1e-7, 1e21, 2 ** 53, -(2 ** 53) + 1, 2 ** 31, -(2 ** 31) - 1, 5e-324, 1.7976931348623157e308]",
]


def _engine(native: bool, **config: Any) -> GuestEngine:
    engine = GuestEngine(native_plain_check=native)
    caps = {"tools": [], "mcp": [], "maxRequestBytes": 4 * MiB, **config}
    engine.configure(jsoncodec.dumps_text(caps), 64 * MiB)
    assert engine.native_plain_check is native
    return engine


def _texts(code: str, native: bool, **config: Any) -> tuple[str, list[str]]:
    """The cell's value text and the argument texts of the requests it made (each answered ``{}``)."""
    engine = _engine(native, **config)
    engine.compile(code, 5.0)
    deadline = time.monotonic() + 5.0
    engine.call_cell(deadline)
    args: list[str] = []
    while True:
        engine.pump(deadline)
        snap = engine.take()
        args += [engine.request_args(i) for i in range(len(snap["requests"]))]
        if snap["done"] is not None:
            break
        for request in snap["requests"]:
            engine.settle(request["id"], True, "{}")
    assert snap["done"] == {"ok": True}, snap["done"]
    value = engine.final_value(16 * MiB, deadline)
    engine.close()
    return value, args


def _same_both_ways(expression: str, **config: Any) -> tuple[str, list[str]]:
    for code in (f"return {expression}", STRICT.format(value=expression)):
        with_c = _texts(code, True, **config)
        assert with_c == _texts(code, False, **config), code
    return with_c


def test_the_c_check_is_built_where_the_suite_runs():
    """scripts/test installs a C compiler before the service, so the suite runs the check it ships."""
    assert plain_check.built(), "guest_runtime/quickjs/_plain_data was not built: is gcc installed? (scripts/test)"


@pytest.mark.parametrize("expression", ODD)
def test_an_odd_value_is_written_as_the_prelude_writes_it(expression: str):
    _same_both_ways(expression)


def test_the_check_is_gone_before_cell_code_runs():
    """The global the C check is parked under is read by the prelude's script and deleted with it."""
    value, _ = _texts("return Object.getOwnPropertyNames(globalThis).filter(n => n.startsWith('__codemode_'))", True)
    assert jsoncodec.loads(value) == []


def _count(value: Any) -> int:
    """JSON values in ``value``, itself included: what the request cap counts."""
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(_count(v) for v in value.values())
    return 1


def _refused_over(expression: str, count: int) -> None:
    """A request carrying ``expression`` (``count`` values; the request's array is one more) is sent
    at the cap and refused one under it, by both walks."""
    _, args = _same_both_ways(expression, maxRequestValues=count + 1)
    assert len(args) == 1, "sent at its value count"
    for native in (True, False):
        refused, args = _texts(STRICT.format(value=expression), native, maxRequestValues=count)
        assert jsoncodec.loads(refused).startswith("RangeError: request arguments hold more than"), refused
        assert args == []


@pytest.mark.parametrize(
    ("expression", "count"),
    [
        ("[1, , 3]", 4),  # a hole is a value: JSON.stringify writes null
        ("(() => { const a = [{b: 1}]; a.length = 1000; return a })()", 1002),
        # extra keys are walked, and taken off the holes (length - keys), as isPlain does
        ("(() => { const a = [1, 2]; a.extra = [3]; return a })()", 4),
        ("(() => { const x = [1, 2]; return [x, x] })()", 7),  # a shared value counts where it appears
    ],
)
def test_holes_and_shared_values_are_counted_as_the_prelude_counts_them(expression: str, count: int):
    _refused_over(expression, count)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=6), children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_plain_data_is_written_and_counted_as_the_prelude_does(value: Any):
    """Both walks write a JSON value alike and count it alike: a request at its value count is sent, one
    value over the cap is refused."""
    _refused_over(json.dumps(value), _count(value))  # JSON text is a JavaScript expression


def test_without_the_extension_the_engine_starts_and_the_prelude_walks_alone():
    """Where the extension was not built (no C compiler at install), importing the engine, its start-up check
    and a cell with a large value all work, the prelude's walk deciding alone."""
    import subprocess
    import sys

    # The package's folder is searched by a finder that knows no extension modules: the built file is there,
    # but the import fails as it does where it was never built.
    script = (
        "import sys, importlib.machinery as m\n"
        "import guest_runtime.quickjs as package\n"
        "(folder,) = package.__path__\n"
        "sys.path_importer_cache[folder] = m.FileFinder(folder, (m.SourceFileLoader, m.SOURCE_SUFFIXES),\n"
        "    (m.SourcelessFileLoader, m.BYTECODE_SUFFIXES))\n"
        "from guest_runtime.quickjs import engine, plain_check\n"
        "assert not plain_check.built()\n"
        "engine.check_engine()\n"
        "e = engine.GuestEngine()\n"
        "assert e.native_plain_check is False\n"
        "print('started')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "started", done.stderr


def _writer(engine: GuestEngine) -> Any:
    """The C check in ``engine``'s context, asked to write: ``expression``'s text, or -1."""
    assert plain_check.install(engine._cptr)  # again, into a context whose prelude already took its copy

    return lambda expression: engine._ctx.eval(plain_check.call(expression, write=True))


#: Strings with every kind of code point: lone surrogates of both halves, pairs, controls, quotes.
ODD_TEXT = st.text(st.characters(codec=None, categories=None), max_size=12) | st.sampled_from(
    ["\ud800", "\udfff", "\ud83d\ude00", "\x00\x1f\x7f", "\u2028", '"\\/']
)
WRITTEN_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([-0.0, 2.0**53, 2.0**53 - 1, -(2.0**53), 1e21, 1e-7, 5e-324])
    | ODD_TEXT,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(ODD_TEXT, children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WRITTEN_VALUES)
@example({"__proto__": [], "1": {"0": None}})
def test_the_c_writer_writes_what_json_stringify_writes(value: Any):
    """Compared inside the engine, before any repair of lone surrogates: the same text to the byte.  The value
    is built by JSON.parse (lone surrogates included), as an object literal would take a "__proto__" key for
    the object's prototype."""
    engine = GuestEngine()
    assert plain_check.install(engine._cptr)  # again, into a context whose prelude already took its copy
    literal = json.dumps(json.dumps(value))  # the JSON text as a JavaScript string literal
    compare = f"(() => {{ const v = JSON.parse({literal}); return {plain_check.call('v', write=True)} === JSON.stringify(v) }})"
    assert engine._ctx.eval(compare)() is True, literal


def test_the_c_writer_leaves_to_the_prelude_what_it_does_not_write():
    """Holes, elements that are not enumerable, accessors, toJSON, cycles, depth, and text over its budget (64
    MiB, outside the engine's heap) go back to the prelude; undefined at the top is written as null."""
    write = _writer(GuestEngine())
    for expression in (
        "[1, , 3]",
        "[1, 2, , ]",
        "Object.defineProperty([1], 0, {enumerable: false})",
        "({get a() { return 1 }})",
        "[{toJSON() { return 1 }}]",
        "(() => { const a = []; a.push(a); return a })()",
        "[1n]",
        "(() => { let v = 1; for (let i = 0; i < 201; i++) v = [v]; return v })()",
    ):
        assert write(expression) == -1, expression
    assert write("undefined") == "null" and write("Symbol()") == "null" and write("[undefined, () => 1]") == -1
    budget = 64 * MiB
    assert len(write(f"'x'.repeat({budget - 2})")) == budget  # the quotes make it exactly the budget
    assert write(f"'x'.repeat({budget - 1})") == -1


def test_many_objects_under_a_deep_chain_are_left_to_the_prelude():
    """Each object is compared with the objects above it (the cycle check): a million such comparisons under a
    deep chain would run long in C, where no deadline interrupts, so past its comparison budget the check
    asks the prelude (whose walk the deadline does interrupt); the same objects under a shallow chain it takes."""
    engine = GuestEngine()
    assert plain_check.install(engine._cptr)  # again, into a context whose prelude already took its copy

    def visits(depth: int) -> Any:
        # 400,000 references to one object, under `depth` arrays: 400,000 x depth comparisons.
        build = f"(() => {{ const o = {{}}; let v = new Array(400000).fill(o); for (let i = 0; i < {depth}; i++) v = [v]; return v }})()"
        return engine._ctx.eval(plain_check.call(build))

    assert visits(5) == 5 + 1 + 400_000  # taken: the chain, the big array and each reference to the object
    assert visits(190) == -1
