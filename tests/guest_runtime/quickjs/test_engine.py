"""The guest driver on its own: one real QuickJS engine with the prelude, driven in-process."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bridge import jsoncodec
from guest_runtime.errors import EngineFault, GuestFault, GuestTimeout
from guest_runtime.quickjs import engine as quickjs_engine
from guest_runtime.quickjs.cell_stacks import map_stack
from guest_runtime.quickjs.engine import GuestEngine, check_engine

MiB = 1024 * 1024


def _engine(**config: Any) -> GuestEngine:
    engine = GuestEngine()
    engine.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB, **config}), 32 * MiB)
    return engine


def _take(engine: GuestEngine) -> dict[str, Any]:
    """``take()``, with each request's arguments read beside it as the worker does (``request_args``)."""
    snap: dict[str, Any] = engine.take()
    for i, request in enumerate(snap["requests"]):
        request["args"] = jsoncodec.loads(engine.request_args(i))
    return snap


def _run(code: str, *, replies: dict[str, str] | None = None, **config: Any) -> tuple[GuestEngine, dict[str, Any]]:
    """Run ``code`` until it stops; answer requests of the methods in ``replies`` (JSON text)."""
    engine = _engine(**config)
    engine.compile(code, 2.0)
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    while True:
        engine.pump(deadline)
        snap = _take(engine)
        answered = [r for r in snap["requests"] if replies and r["method"] in replies]
        if snap["done"] is not None or not answered:
            return engine, snap
        for r in answered:
            engine.settle(r["id"], True, replies[r["method"]])


def _value(code: str, **kw: Any) -> Any:
    engine, snap = _run(code, **kw)
    assert snap["done"] == {"ok": True}, snap["done"]
    return jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 2.0))


def test_check_engine_proves_the_prelude_and_rejection_tracker():
    """The start-up self check passes on the pinned binding."""
    check_engine()


def test_check_engine_refuses_an_engine_whose_busy_loop_is_not_interrupted(monkeypatch: pytest.MonkeyPatch):
    """The deadline is the driver's own interrupt handler: without it installed, the start-up check fails."""
    monkeypatch.setattr(quickjs_engine._lib, "JS_SetInterruptHandler", lambda *args: None)
    with pytest.raises(EngineFault, match="did not stop a busy loop"):
        check_engine()


def test_heap_bytes_is_what_the_memory_limit_counts_as_it_grows_and_shrinks():
    """heap_bytes reads the engine's own allocation counter: memory()'s malloc_size at every point."""
    engine, snap = _run("globalThis.big = new Array(200000).fill(7); return 1")
    assert snap["done"] == {"ok": True}
    grown = engine.heap_bytes()
    assert grown == engine._ctx.memory()["malloc_size"] and grown > 200000 * 8
    engine._ctx.eval("globalThis.big = null")
    engine._ctx.gc()
    assert engine.heap_bytes() == engine._ctx.memory()["malloc_size"] < grown


def test_check_engine_refuses_a_binding_whose_malloc_counters_moved(monkeypatch: pytest.MonkeyPatch):
    """Read one word off, the counters do not match memory(): the worker must not start on garbage."""
    monkeypatch.setattr(quickjs_engine, "_MALLOC_STATE_OFFSET", quickjs_engine._MALLOC_STATE_OFFSET + 8)
    with pytest.raises(EngineFault, match="malloc counters"):
        check_engine()


def _hook_slots(engine: GuestEngine) -> list[str]:
    # Read by the binding's own eval, which runs no hook operation.
    names = engine._ctx.eval("JSON.stringify(Object.getOwnPropertyNames(globalThis))")
    return [n for n in jsoncodec.loads(names) if n.startswith("__codemode_hook_")]


@pytest.mark.parametrize("first", ["configure", "compile"])
def test_the_hooks_global_is_gone_at_its_first_call(first: str):
    """The driver reads the hook from a global once; the hook's first call, whatever it is, deletes that global."""
    engine = GuestEngine()
    assert len(_hook_slots(engine)) == 1  # parked there by the prelude's script until then
    if first == "configure":
        engine.configure('{"tools":[],"mcp":[],"maxRequestBytes":1024}', 32 * MiB)
    else:
        engine.compile("return Object.getOwnPropertyNames(globalThis)", 2.0)
    assert _hook_slots(engine) == []


def test_the_hook_configures_once():
    """A second configure is refused, so caps set by the host cannot be re-set later."""
    engine = _engine()
    with pytest.raises(Exception, match="configured once"):
        engine.configure('{"tools":[],"mcp":[],"maxRequestBytes":1e12}', 32 * MiB)


TOOLS_CONFIG = jsoncodec.dumps_text(
    {
        "tools": [
            {"callableName": n, "toolName": n, "description": "d", "source": "plugin", "input": "{}"}
            for n in ("alpha", "beta")
        ],
        "mcp": [{"identifier": "srv", "tools": ["t"]}],
        "maxRequestBytes": MiB,
    }
)
#: What a cell sees of the configured globals: names, descriptors, the handles' own properties.
GLOBALS_VIEW = """
    const own = o => Object.getOwnPropertyNames(o).map(k => {
        const d = Object.getOwnPropertyDescriptor(o, k);
        return [k, typeof d.value, !!d.writable, !!d.enumerable, !!d.configurable];
    });
    return [own(globalThis), own(alpha), own(MCP), own(MCP.srv), Object.isFrozen(beta), JSON.stringify(alpha)];
"""


def _view(engine: GuestEngine) -> tuple[Any, int]:
    heap = engine.heap_bytes()
    engine.compile(GLOBALS_VIEW, 2.0)
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    assert engine.take()["done"] == {"ok": True}
    return jsoncodec.loads(engine.final_value(MiB, deadline)), heap


def test_a_prepared_engine_is_the_engine_configure_makes():
    """prepare() then configure() with the same text: the same globals and the same heap as configure() alone."""
    inline = GuestEngine()
    inline.configure(TOOLS_CONFIG, 32 * MiB)
    prepared = GuestEngine()
    prepared.prepare(TOOLS_CONFIG)
    assert prepared.prepared_for(TOOLS_CONFIG) and not prepared.prepared_for(TOOLS_CONFIG + " ")
    prepared.configure(TOOLS_CONFIG, 32 * MiB)
    (seen_prepared, heap_prepared), (seen_inline, heap_inline) = _view(prepared), _view(inline)
    assert seen_prepared == seen_inline
    # malloc's usable sizes vary by a few dozen bytes between identical engines: no more than that.
    assert abs(heap_prepared - heap_inline) < 1024


def test_a_prepared_engine_refuses_another_configuration():
    """Configuring an engine prepared for other text is a second configuration, which the prelude refuses."""
    engine = GuestEngine()
    engine.prepare(TOOLS_CONFIG)
    with pytest.raises(Exception, match="configured once"):
        engine.configure('{"tools":[],"mcp":[],"maxRequestBytes":1e12}', 32 * MiB)


def test_snapshot_and_value_texts_have_no_lone_surrogates():
    """Requests, output, errors and the value leave the engine with lone surrogates as U+FFFD."""
    engine, snap = _run(r"""
        text('a\ud800b'); json({['\udfff']: 'x\udc00'});
        void results.save('\ud800');
        return ['\udfff', '\ud83d\ude00'];
    """)
    entries = [jsoncodec.loads(e) for e in snap["output"]]
    assert entries == [{"type": "text", "text": "a\ufffdb"}, {"type": "json", "value": {"\ufffd": "x\ufffd"}}]
    assert snap["requests"][0]["args"] == ["\ufffd"]
    assert jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 2)) == ["\ufffd", "😀"]
    _, failed = _run(r"throw new Error('bad \ud800')")
    assert failed["done"]["error"].startswith("Error: bad \ufffd")


def test_too_deep_values_are_refused_for_requests_and_marked_in_output():
    """Past 200 levels: tool arguments reject with a TypeError naming the cap; emitted values get a marker."""
    deep = "let v = 1; for (let i = 0; i < 250; i++) v = [v];"
    message = _value(
        deep + "try { await results.save(v); return 'saved' } catch (e) { return e.name + ': ' + e.message }"
    )
    assert message.startswith("TypeError: value is nested more than 200 levels deep")
    value = _value(deep + "return v")
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert depth == 200 and value.startswith("[Nested too deep")
    assert (
        _value("let v = 1; for (let i = 0; i < 200; i++) v = [v]; await results.save(v).catch(() => 0); return 1") == 1
    )


def test_pending_cap_rejects_catchably_and_timers_throw():
    """Over maxPendingRequests a request rejects and setTimeout throws, both RangeError; none is queued."""
    engine, snap = _run(
        """
        let made = 0, thrown = null;
        try { for (let i = 0; i < 10; i++) { setTimeout(() => {}, 5); made++; } } catch (e) { thrown = e.name; }
        const refused = await results.save(1).then(() => 'queued', e => e.name + ': ' + e.message);
        text(JSON.stringify([made, thrown, refused]));
        await new Promise(() => {});
    """,
        maxPendingRequests=4,
    )
    made, thrown, refused = jsoncodec.loads(jsoncodec.loads(snap["output"][0])["text"])
    assert (made, thrown) == (4, "RangeError")
    assert refused.startswith("RangeError: too many host requests pending (limit 4")
    assert len(snap["requests"]) == 4 and snap["outstanding"] == 4


def test_burst_bytes_cap_rejects_the_rest_of_a_burst():
    """Requests of one synchronous burst carry at most maxQueuedBytes characters; the rest reject catchably."""
    value = _value(
        """
        const s = 'x'.repeat(1000);
        const out = await Promise.all([1, 2, 3, 4].map(() => results.save(s).then(() => 'ok', e => e.name)));
        return out;
    """,
        maxQueuedBytes=2500,
        replies={"results.save": "{}"},
    )
    assert value == ["ok", "ok", "RangeError", "RangeError"]


def test_index_setters_on_builtin_prototypes_cannot_touch_the_snapshot():
    """An Array.prototype index setter neither breaks nor alters what the prelude builds."""
    engine, snap = _run("""
        Object.defineProperty(Array.prototype, '1', { set(v) { throw new Error('setter ran') }, configurable: true });
        Object.defineProperty(Object.prototype, 'code', { set(v) { throw new Error('setter ran') }, configurable: true });
        text('a'); text('b'); text('c');
        void results.save([1, 2, 3]); void results.save({a: 1});
        await new Promise(() => {});
    """)
    assert [jsoncodec.loads(e)["text"] for e in snap["output"]] == ["a", "b", "c"]
    assert [r["args"] for r in snap["requests"]] == [[[1, 2, 3]], [{"a": 1}]]


def test_cell_code_that_breaks_a_hook_call_is_a_guest_fault():
    """A Promise species getter that throws inside the host's start call fails the cell as GuestFault."""
    engine = _engine()
    engine.compile(
        "Object.defineProperty(Promise.prototype, 'constructor', { get() { throw new Error('mine') } })", 2.0
    )
    with pytest.raises(GuestFault, match="mine"):
        engine.call_cell(time.monotonic() + 2.0)


def test_value_getters_run_under_the_cell_deadline():
    """An endless getter in the returned value stops at the cell's deadline, not later."""
    engine, snap = _run("return { get x() { for (;;) {} } }")
    started = time.thread_time()  # the engine runs on this thread; load does not inflate its CPU time
    with pytest.raises(GuestTimeout):
        engine.final_value(MiB, time.monotonic() + 0.2)
    assert time.thread_time() - started < 1.5


def test_map_stack_keeps_cell_frames_renumbered():
    """Prelude frames and the wrapper go; cell frames get cell.js line numbers."""
    text = "Error: x\n    at f (<input>:4:3)\n    at codemodeHostHook (:0:1)\n    at <input>:3:9\n    at <input>:1:2"
    assert map_stack(text) == "Error: x\n    at f (cell.js:2:3)\n    at cell.js:1:9"


def test_no_stack_frame_api_reaches_a_prelude_function():
    """Error.prepareStackTrace/captureStackTrace call sites, caller and callee expose no function and no prelude frame."""
    from tests.support.stack_probe import PROBE, check_report

    engine = _engine()
    engine.compile(PROBE, 2.0)
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    for _ in range(20):
        engine.pump(deadline)
        snap = _take(engine)
        if snap["done"] is not None:
            break
        for r in snap["requests"]:
            if r["method"] == "results.load":  # a rejection: the hook builds the Error
                engine.settle(r["id"], False, '{"message":"no such result","code":"invalid_input"}')
            else:
                engine.settle(r["id"], True, "{}")
    assert snap["done"] == {"ok": True}, snap["done"]
    value = jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 2.0))
    check_report(value["b"])
    assert "probe" in value["b"]["names"]  # the cell's own frames are still there


def test_patched_function_call_never_sees_prelude_internals():
    """Replacing Function.prototype.call does not hand the prelude's private tables to the cell."""
    value = _value("""
        const seen = [];
        const original = Function.prototype.call;
        Function.prototype.call = function (...args) { seen.push(args.length); return original.apply(this, [args[0], ...args.slice(1)]); };
        text(function f() {}); json([() => 1]); console.log(() => 1);
        Function.prototype.call = original;
        return seen.length;
    """)
    assert value == 0


def _settle_failures(code: str, *, rounds: int = 3) -> GuestEngine:
    """Run ``code``; fail every tool request with code "boom_code" until the cell is done."""
    engine = _engine(tools=[{"callableName": "nop", "toolName": "nop", "description": "x"}])
    engine.compile(code, 2.0)
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    for _ in range(rounds):
        engine.pump(deadline)
        snap = _take(engine)
        for r in snap["requests"]:
            if r["method"] == "tool":
                engine.settle(r["id"], False, '{"message": "boom %d", "code": "boom_code"}' % r["id"])
            else:
                engine.settle(r["id"], True, "null")
        if snap["done"] is not None:
            break
    return engine


def _bridge_failure(engine: GuestEngine) -> dict[str, Any] | None:
    failure = engine.unhandled_bridge_rejection()
    return None if failure is None else dict(failure)


@pytest.mark.parametrize(
    "code",
    [
        "try { await nop() } catch (e) {} return 1",
        "const p = nop(); await new Promise(r => setTimeout(r, 5)); await p.catch(() => 0); return 1",
        "Promise.prototype.then.call(nop(), null, () => 0); return 1",
        "await Promise.allSettled([nop(), nop()]); return 1",
    ],
)
def test_a_handled_bridge_failure_is_not_reported(code: str):
    """Handled before or after it failed, by await, catch, a direct then or a combinator: no bridge failure."""
    engine = _settle_failures(code)
    assert _bridge_failure(engine) is None
    assert engine.unhandled_rejections() == []


def test_the_first_unhandled_bridge_failure_is_reported_with_its_code():
    """Two tool calls nobody awaits: the lower request id is the one reported, with the host's code."""
    engine = _settle_failures("void nop(); void nop(); await new Promise(r => setTimeout(r, 5)); return 1")
    failure = _bridge_failure(engine)
    assert failure is not None and failure["code"] == "boom_code"
    assert failure["error"].startswith("Error: boom 1")


def test_cell_code_run_while_a_failure_is_settled_cannot_pass_for_the_bridge_promise():
    """prepareStackTrace (building the error) and toString (the tracker's reason text) reject promises of
    their own while a failure is settled: the tool call's promise, handled later, is still told apart, and
    the cell's rejections stay the guest's own."""
    engine = _settle_failures(
        "let once = 2; const reject = (m) => { if (once-- > 0) void Promise.reject(m); };"
        "Error.prepareStackTrace = () => { reject('from prepare'); return 'x' };"
        "Error.prototype.toString = function () { reject('from toString'); return 'T' };"
        "const p = nop(); await new Promise(r => setTimeout(r, 5)); await p.catch(() => 0); return 1"
    )
    assert _bridge_failure(engine) is None
    assert sorted(engine.unhandled_rejections()) == ["from prepare", "from toString"]


def test_bridge_promises_are_plain_promises():
    """A tool call's promise is a native Promise: the cell sees no prelude class, and await takes one job."""
    engine = _settle_failures(
        "const p = nop(); const plain = Object.getPrototypeOf(p) === Promise.prototype && p.constructor === Promise;"
        "p.catch(() => 0); return plain",
        rounds=2,
    )
    assert jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 2.0)) is True


#: Values for the tool fast path (only the input walked, under its ["nop", ...] head) and the generic
#: path (the whole argument array walked: store("nop", v) sends ["nop", v]) to agree on: plain, exotic,
#: refused, at the nesting and value caps.
_ARGUMENT_CASES = [
    "({a: [1, 'x', null, true, {b: -0.5}], s: '\\ud800'})",
    "[ , 1, , ]",
    "(() => { let v = 1; for (let i = 0; i < 199; i++) v = [v]; return v })()",
    "(() => { let v = 1; for (let i = 0; i < 200; i++) v = [v]; return v })()",
    "(() => { const o = {}; o.self = o; return o })()",
    "({get g() { return 1 }})",
    "({toJSON() { return 1 }})",
    "({big: 1n})",
    "({f() {}, u: undefined, s: Symbol('x')})",
    "({p: Promise.resolve(1)})",
    "({e: new RangeError('r')})",
    "({e: Object.setPrototypeOf({message: 'm'}, Error.prototype)})",
    "({k: Object.create(Promise.prototype)})",
    "({n: nop})",
    "new Proxy({a: 1}, {get: (t, k) => k === 'a' ? 2n : t[k]})",
    "new Array(5).fill(0)",
    "new Array(6).fill(0)",
]


@pytest.mark.parametrize("value", _ARGUMENT_CASES)
def test_tool_arguments_match_the_whole_array_walk(value: str):
    """A tool call's arguments are the text, the refusal and the value count of walking [name, input]."""
    engine, snap = _run(
        f"const v = {value};"
        "const fast = await nop(v).then(() => 'sent', e => e.name + ': ' + e.message);"
        "const slow = await store('nop', v).then(() => 'sent', e => e.name + ': ' + e.message);"
        "return [fast, slow]",
        tools=[{"callableName": "nop", "toolName": "nop", "description": "x"}],
        maxRequestValues=8,
        replies={"tool": "null", "store.set": "null"},
    )
    assert snap["done"] == {"ok": True}
    fast, slow = jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 2.0))
    assert fast == slow


def test_tool_argument_texts_match_the_whole_array_walk():
    """The JSON text a tool call carries is the text of serialising [name, input] whole."""
    engine = _engine(tools=[{"callableName": "nop", "toolName": "nop", "description": "x"}])
    cases = ", ".join(_ARGUMENT_CASES[:3] + _ARGUMENT_CASES[8:9] + _ARGUMENT_CASES[15:16])
    engine.compile(f"for (const v of [{cases}]) {{ nop(v).catch(() => 0); store('nop', v).catch(() => 0); }}", 2.0)
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    requests = engine.take()["requests"]
    texts = [engine.request_args(i) for i in range(len(requests))]
    assert [r["method"] for r in requests] == ["tool", "store.set"] * 5
    assert texts[0::2] == texts[1::2]


def test_promises_and_errors_in_tool_arguments_take_the_careful_walk():
    """Prototype shortcuts aside, a Promise anywhere in the input is refused and an Error (by its
    prototype chain) travels as its name and message, whatever object it looks like."""
    engine = _engine(tools=[{"callableName": "nop", "toolName": "nop", "description": "x"}])
    engine.compile(
        "class Odd extends TypeError {};"
        "const refused = nop({p: [Promise.resolve(1)]}).catch(e => e.message);"
        "nop([new Odd('o'), Object.setPrototypeOf({message: 'm'}, RangeError.prototype)]);"
        "return await refused",
        2.0,
    )
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    snap = _take(engine)
    assert [r["args"] for r in snap["requests"]] == [
        ["nop", [{"name": "TypeError", "message": "o"}, {"name": "RangeError", "message": "m"}]]
    ]
    assert jsoncodec.loads(engine.final_value(MiB, deadline)).startswith("an unawaited Promise is not JSON")


@pytest.mark.parametrize("size", [10, 40_000])
def test_request_arguments_arrive_whole_inline_or_one_by_one(size: int):
    """Small bursts ride inside take's text, large ones come one call each: the texts are the same,
    newlines and lone surrogates in strings included, and take's own text stays the snapshot."""
    engine = _engine()
    engine.compile(
        f"const s = 'x'.repeat({size});"
        "results.save({a: 'line\\nbreak', b: '\\ud800', s}).catch(() => 0);"
        "results.save([s, 1]).catch(() => 0); results.load('id').catch(() => 0);",
        2.0,
    )
    deadline = time.monotonic() + 2.0
    engine.call_cell(deadline)
    engine.pump(deadline)
    snap = engine.take()
    assert [r["method"] for r in snap["requests"]] == ["results.save", "results.save", "results.load"]
    assert (engine._taken_args is None) == (size > 30_000)  # which of the two ways they came
    texts = [engine.request_args(i) for i in range(3)]
    assert texts[0] == '[{"a":"line\\nbreak","b":"\\ufffd","s":"' + "x" * size + '"}]'
    assert texts[1:] == ['[["' + "x" * size + '",1]]', '["id"]']
    assert [engine.request_args(i) for i in range(3)] == ["[]"] * 3  # each is handed over once


_NOP = {"callableName": "nop", "toolName": "nop", "description": "x"}


def _large_reply(rows: int) -> str:
    return jsoncodec.dumps_text([{"id": i, "name": f"row-{i}", "tags": ["a", "b"]} for i in range(rows)])


def test_a_large_reply_leaves_the_next_collection_due_at_one_and_a_half_times_the_heap():
    """A reply over GC_PAUSE_BYTES is parsed with the collector held off; afterwards the next collection is
    due where the engine puts it after one (1.5x the heap), not at 90% of the cap nor at the old threshold."""
    payload = _large_reply(30_000)
    assert len(payload) >= quickjs_engine.GC_PAUSE_BYTES
    engine = _engine(tools=[_NOP])
    engine.compile("const rows = await nop({}); return rows.length", 30.0)
    deadline = time.monotonic() + 30.0  # a deadline no busy machine reaches: the test is about the collector
    engine.call_cell(deadline)
    engine.pump(deadline)
    request = _take(engine)["requests"][0]
    engine.settle(request["id"], True, payload)
    threshold = quickjs_engine.gc_threshold(engine)
    heap = engine.heap_bytes()
    assert threshold == heap + heap // 2
    engine.pump(deadline)
    assert _take(engine)["done"] == {"ok": True}
    assert jsoncodec.loads(engine.final_value(MiB, deadline)) == 30_000


def test_garbage_made_before_a_large_reply_does_not_fail_its_parse():
    """A large reply's parse runs with the collector paused, but only after a collection: garbage the cell
    left behind does not make it fail the heap cap (the reply alone fits the cap, with the garbage it would not)."""
    payload = _large_reply(100_000)
    engine = GuestEngine()
    engine.configure(jsoncodec.dumps_text({"tools": [_NOP], "mcp": [], "maxRequestBytes": 8 * MiB}), 72 * MiB)
    # About 22 MiB of cycles, kept alive until just before the call and then garbage that only the
    # collector frees; the parsed reply needs about 54 MiB more: together they are over the 72 MiB cap.
    engine.compile(
        "let keep = [];\n"
        "for (let i = 0; i < 60000; i++) { const a = {pad: 'x'.repeat(100) + i}; const b = {a}; a.b = b; keep.push(a); }\n"
        "keep = null;\n"
        "const rows = await nop({}); return rows.length",
        30.0,
    )
    deadline = time.monotonic() + 30.0  # as above
    engine.call_cell(deadline)
    engine.pump(deadline)
    request = _take(engine)["requests"][0]
    engine.settle(request["id"], True, payload)
    engine.pump(deadline)
    assert _take(engine)["done"] == {"ok": True}
    assert jsoncodec.loads(engine.final_value(MiB, deadline)) == 100_000
