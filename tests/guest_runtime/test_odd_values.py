"""Odd guest values in both engines: whatever a cell makes, handing it to the host fails only that cell.

A real worker process runs each case (as the pool starts one, confined); hypothesis builds values the
JSON boundary does not expect (types, functions, sets, bytes, proxies whose traps throw, getters that
throw, cycles, huge numbers, lone surrogates ...) and hands them over every way a cell can: as its
value, as output, as a host request's arguments.  Each case ends in a done frame, the worker neither
exits nor asks to be replaced, and the next cell in the same process runs as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.messages import Language, Reply, run_frame, settle_frame

from .test_worker import WorkerProcess

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

PYTHON_ATOMS = [
    "type(catalog)",
    "type(type)",
    "type(1)",
    "catalog",
    "catalog.all",
    "len",
    "print",
    "text",
    "{1, 2}",
    "frozenset()",
    "b'x'",
    "range(3)",
    "slice(1, 2)",
    "Exception('x')",
    "ValueError",
    "lambda: 1",
    "(1, (2, 3))",
    "2 ** 200",
    "-(2 ** 64)",
    "float('nan')",
    "float('inf')",
    "'\\ud800'",
    "'x' * 70000",
    "{(1, 2): 3}",
    "{1: 2}",
    "None",
    "iter([1])",
    "enumerate([1])",
    "zip([1], [2])",
    "divmod(7, 2)",
    "sorted",
    "str",
]
PYTHON_CONTEXTS = [
    "{v}",
    "json({v})",
    "text({v})",
    "print({v})",
    "await store('k', {v})",
    "await yield_control({v})",
    "str({v})",
]

JS_ATOMS = [
    "Symbol('s')",
    "10n",
    "() => 1",
    "function* g() {}",
    "async () => 1",
    "new Proxy({}, {get() { throw new Error('trap') }, ownKeys() { throw new Error('keys') }})",
    "new Proxy([], {get() { throw new Error('trap') }})",
    "({get x() { throw new Error('getter') }})",
    "(() => { const a = {}; a.a = a; return a })()",
    "(() => { const a = []; a.push(a); return a })()",
    "new Map([[1, 2]])",
    "new Set([1])",
    "new Date(NaN)",
    "new WeakMap()",
    "new ArrayBuffer(8)",
    "new Uint8Array(3)",
    "({toJSON() { throw new Error('toJSON') }})",
    "({toJSON() { return undefined }})",
    "({toJSON() { return 10n }})",
    "Object.create(null)",
    "'\\ud800'",
    "'x'.repeat(70000)",
    "[, , 1]",
    "-0",
    "NaN",
    "globalThis",
    "Promise.resolve(1)",
    "new Error('e')",
    "Math",
    "catalog",
    "text",
    "new (class A { #p = 1 })()",
    "Object.defineProperty({}, 'x', {enumerable: true, get() { throw 1 }})",
    "undefined",
]
JS_CONTEXTS = [
    "return {v}",
    "json({v}); return 1",
    "text({v}); return 1",
    "console.log({v}); return 1",
    "await results.save({v}); return 1",
    "await yield_control({v}); return 1",
    "return String({v})",
]


def _nested(atoms: list[str], array: str, mapping: str) -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(atoms),
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda items: array.format(", ".join(items))),
            inner.map(lambda item: mapping.format(item)),
        ),
        max_leaves=4,
    )


PYTHON_CASES = st.tuples(st.sampled_from(PYTHON_CONTEXTS), _nested(PYTHON_ATOMS, "[{}]", "{{'k': {}}}"))
JS_CASES = st.tuples(st.sampled_from(JS_CONTEXTS), _nested(JS_ATOMS, "[{}]", "({{k: {}}})"))


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    w = WorkerProcess()
    yield w
    w.proc.kill()
    w.proc.wait()


def _run(worker: WorkerProcess, code: str, language: Language) -> dict[str, Any]:
    """One cell to its end: host requests are refused (this worker has no host), so the guest sees errors."""
    worker.send(
        run_frame(
            cell_id="odd",
            code=code,
            budget_ms=5000,
            memory_limit_bytes=64 << 20,
            max_output_bytes=65536,
            value_capture_bytes=65536,
            config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
            language=language,
        )
    )
    while True:
        frame = worker.recv()
        if frame["t"] == "done":
            return frame
        assert frame["t"] == "idle", frame
        replies: list[Reply] = [
            {"id": r["id"], "ok": False, "error": {"message": "no host here"}} for r in frame["requests"]
        ]
        worker.send(settle_frame("odd", 5000, replies))


def _check(worker: WorkerProcess, code: str, language: Language) -> None:
    done = _run(worker, code, language)
    assert done["recycle"] is False, (code, done)
    assert done["ok"] or done["error"]["code"] != "runtime_unavailable", (code, done)
    assert worker.proc.poll() is None, f"the worker exited on {code!r}"


@FUZZ
@given(PYTHON_CASES)
def test_odd_python_values_fail_only_their_cell(worker, case):
    context, value = case
    _check(worker, "x = 1\n" + context.format(v=value), "python")


@FUZZ
@given(JS_CASES)
def test_odd_javascript_values_fail_only_their_cell(worker, case):
    context, value = case
    _check(worker, context.format(v=value), "javascript")


def test_the_worker_serves_the_next_cell_after_the_odd_ones(worker):
    """After every odd case above, the same process still completes a plain cell in each language."""
    assert _run(worker, "return 41 + 1", "javascript")["text"] == "42"
    assert _run(worker, "41 + 1", "python")["text"] == "42"
