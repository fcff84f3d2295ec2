"""Guest output API against the real service: return value, text/json/console, serialisation rules."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run

UNAWAITED = "[Unawaited Promise: use await or Promise.all(...) before emitting or returning values.]"
TRUNCATED = "[console output truncated]"


def _completed(env: dict) -> dict:
    assert env["status"] == "completed", env
    return env


# ---- return value and ordering -------------------------------------------------------------------


def test_undefined_return_becomes_null(client):
    """`return undefined` and a body without `return` both give value null."""
    assert _completed(run(client, "return undefined"))["value"] is None
    assert _completed(run(client, "const a = 1; a + 1;"))["value"] is None


#: The behaviour is the same in both guest languages: one test, the cell spelled per language.
LANGUAGES = pytest.mark.parametrize("language", ["javascript", "python"])


@LANGUAGES
def test_return_value_is_the_envelope_value(client, language):
    """A returned JSON value (Python: the last expression's) comes back unchanged as `value`."""
    cells = {
        "javascript": 'return {n: 1.5, s: "x", list: [true, null], nested: {deep: [1, {k: "v"}]}}',
        "python": '{"n": 1.5, "s": "x", "list": [True, None], "nested": {"deep": [1, {"k": "v"}]}}',
    }
    env = _completed(run(client, cells[language], language=language))
    assert env["value"] == {"n": 1.5, "s": "x", "list": [True, None], "nested": {"deep": [1, {"k": "v"}]}}


@LANGUAGES
def test_text_json_and_console_share_one_ordered_stream(client, language):
    """text, json and console.* (Python: print) entries appear in call order."""
    cells = {
        "javascript": 'text("a"); console.log("b", 1); json({y: 1}); console.log("w"); text("z"); return 3',
        "python": 'text("a")\nprint("b", 1)\njson({"y": 1})\nprint("w")\ntext("z")\n3',
    }
    env = _completed(run(client, cells[language], language=language))
    assert env["output"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b 1"},
        {"type": "json", "value": {"y": 1}},
        {"type": "text", "text": "w"},
        {"type": "text", "text": "z"},
    ]
    assert env["value"] == 3


def test_console_renders_objects_and_levels(client):
    """console.log renders objects in its own short form; console.warn prefixes its level."""
    env = _completed(run(client, 'console.log("b", {x: 2}); console.warn("w"); return 1'))
    assert [e["text"] for e in env["output"]] == ["b {x: 2}", "[warn] w"]


@LANGUAGES
def test_text_encodes_non_strings_as_json(client, language):
    """text() keeps strings verbatim and JSON-encodes other values."""
    cells = {
        "javascript": 'text("plain \\"q\\""); text({a: [1, 2]}); text(5); return null',
        "python": 'text("plain \\"q\\"")\ntext({"a": [1, 2]})\ntext(5)\nNone',
    }
    env = _completed(run(client, cells[language], language=language))
    texts = [e["text"] for e in env["output"]]
    assert texts[0] == 'plain "q"'
    assert json.loads(texts[1]) == {"a": [1, 2]}
    assert texts[2] == "5"


def test_console_levels_are_prefixed(client):
    """console.warn/error/debug prefix their level; log/info do not."""
    env = _completed(
        run(
            client,
            'console.log("l"); console.info("i"); console.warn("w"); '
            'console.error("e"); console.debug("d"); return typeof console.table',
        )
    )
    assert [e["text"] for e in env["output"]] == ["l", "i", "[warn] w", "[error] e", "[debug] d"]
    assert env["value"] == "undefined"


# ---- bounded console -------------------------------------------------------------------------------


def test_console_call_shows_at_most_100_values(client):
    """One console.log call renders no more than 100 of its arguments."""
    env = _completed(run(client, "console.log(...Array.from({length: 300}, (_, i) => i)); return 1"))
    shown = env["output"][0]["text"].split(" ")
    assert shown[:3] == ["0", "1", "2"]
    assert len(shown) == 100 and shown[-1] == "99"


def test_console_total_cap_marks_truncation_once_then_drops(client):
    """Past the console budget one truncation marker is emitted and later console calls vanish."""
    env = _completed(
        run(
            client,
            'for (let i = 0; i < 3000; i++) console.log("line " + i, "x".repeat(20)); '
            'console.log("late"); console.error("late too"); text("after"); return 1',
        )
    )
    texts = [e["text"] for e in env["output"]]
    assert texts.count(TRUNCATED) == 1
    assert texts[-2:] == [TRUNCATED, "after"]  # text() is not console: it still lands
    assert "late" not in texts and "[error] late too" not in texts
    console_units = sum(len(json.dumps(e, ensure_ascii=False, separators=(",", ":"))) for e in env["output"][:-2])
    assert console_units <= 16384
    assert len(texts) > 100  # the budget was used, not refused up front


def test_console_never_throws_on_hostile_values(client):
    """console.error with throwing getters, cycles, symbols, bigints and functions does not throw."""
    env = _completed(
        run(
            client,
            'const o = {get x() { throw new Error("g") }}; o.self = o; '
            'console.error(o, Symbol("s"), 10n, () => 1); return "alive"',
        )
    )
    assert env["value"] == "alive"
    text = env["output"][0]["text"]
    assert text.startswith("[error] ")
    assert "[Circular]" in text and "10n" in text


def test_console_clips_long_strings(client):
    """A console message is clipped to at most 4096 UTF-16 units (plus an ellipsis)."""
    env = _completed(
        run(
            client,
            'console.log("a".repeat(600), "b".repeat(600), "c".repeat(600), '
            '"d".repeat(600), "e".repeat(600), "f".repeat(600), "g".repeat(600), '
            '"h".repeat(600)); return 1',
        )
    )
    text = env["output"][0]["text"]
    assert len(text) <= 4097
    assert "a" * 600 not in text  # each string is clipped to 512 units


# ---- serialisation rules ----------------------------------------------------------------------------


def test_unawaited_promise_serialises_as_the_fixed_string(client):
    """An unawaited Promise in the value or in json() becomes the fixed advice string."""
    env = _completed(run(client, "const p = Promise.resolve(1); json({p}); return {p, list: [p]}"))
    assert env["value"] == {"p": UNAWAITED, "list": [UNAWAITED]}
    assert env["output"] == [{"type": "json", "value": {"p": UNAWAITED}}]


def test_error_serialises_as_name_message_and_own_fields_without_tojson(client):
    """An Error becomes {name, message, ...own fields}; its toJSON is not called."""
    env = _completed(
        run(
            client,
            'const e = new RangeError("boom"); e.code = "E1"; e.count = 7; '
            'e.toJSON = () => "TOJSON RAN"; json(e); return {e}',
        )
    )
    expected = {"name": "RangeError", "message": "boom", "code": "E1", "count": 7}
    assert env["value"] == {"e": expected}
    assert env["output"] == [{"type": "json", "value": expected}]


def test_allsettled_rejection_reasons_serialise_as_errors(client):
    """Promise.allSettled reasons that are Errors serialise as {name, message, ...}."""
    env = _completed(
        run(
            client,
            'const e = new TypeError("t"); e.toJSON = () => "no"; '
            "return await Promise.allSettled([Promise.reject(e), Promise.resolve(2)])",
        )
    )
    assert env["value"] == [
        {"status": "rejected", "reason": {"name": "TypeError", "message": "t"}},
        {"status": "fulfilled", "value": 2},
    ]


def test_literal_proto_key_survives_value_and_json(client):
    """A literal "__proto__" data key survives in the value and in json() output."""
    env = _completed(run(client, 'const v = JSON.parse(\'{"nested":[1],"__proto__":"data"}\'); json(v); return v'))
    assert env["value"] == {"nested": [1], "__proto__": "data"}
    assert env["output"] == [{"type": "json", "value": {"nested": [1], "__proto__": "data"}}]


def test_typed_arrays_serialise_index_keyed(client):
    """Number-valued typed arrays become index-keyed objects, as JSON.stringify does."""
    env = _completed(run(client, "return {u8: new Uint8Array([1, 2]), f: new Float64Array([0.5])}"))
    assert env["value"] == {"u8": {"0": 1, "1": 2}, "f": {"0": 0.5}}


def test_final_value_never_calls_user_tojson_nor_starts_tools(client):
    """Returning an object with a toJSON never runs it, so its tool call never starts."""
    env = _completed(
        run(
            client,
            "globalThis.flag = false; "
            'return {a: 1, toJSON() { globalThis.flag = true; text("ran"); '
            'echo({x: 1}); return "replaced"; }}',
        )
    )
    assert env["value"] == {"a": 1}
    assert env["output"] == []
    assert env["bridge_dispatch_started"] is False
    assert env["telemetry"]["call_count"] == 0


def test_dates_must_be_converted_explicitly(client):
    """A Date serialises as {} (no toJSON); toISOString() gives the string."""
    env = _completed(run(client, "const d = new Date(0); return {raw: d, iso: d.toISOString()}"))
    assert env["value"] == {"raw": {}, "iso": "1970-01-01T00:00:00.000Z"}


def test_non_json_leftovers_follow_emit_rules(client):
    """undefined in arrays becomes null, bigint a string, functions are dropped, NaN becomes null."""
    env = _completed(run(client, "return {arr: [undefined, 1], big: 12n, fn: () => 1, nan: NaN, u: undefined}"))
    assert env["value"] == {"arr": [None, 1], "big": "12", "nan": None}


def test_cyclic_value_does_not_fail_the_cell(client):
    """A cyclic return value completes with a placeholder instead of failing."""
    env = _completed(run(client, "const o = {a: 1}; o.self = o; return o"))
    assert env["value"]["a"] == 1
    assert isinstance(env["value"]["self"], str)


# ---- entry cap -----------------------------------------------------------------------------------


def test_output_entries_past_the_cap_throw_a_catchable_range_error(client):
    """The 10,001st text()/json() throws a RangeError saying to join text; earlier output is kept."""
    env = _completed(
        run(
            client,
            """
        for (let i = 0; i < 10000; i++) text(i % 1000 === 0 ? String(i) : "");
        const refused = [];
        for (const emit of [() => text("late"), () => json({late: true})]) {
          try { emit(); refused.push(null); } catch (e) { refused.push([e.name, e.message]); }
        }
        console.log("dropped, not thrown");
        return refused;
    """,
            max_output_bytes=1024 * 1024,
        )
    )
    for name, message in env["value"]:
        assert name == "RangeError" and "too many output entries (limit 10000 per cell)" in message
        assert "join text" in message
    assert len(env["output"]) == 10000
    assert [e["text"] for e in env["output"] if e["text"]] == [str(i) for i in range(0, 10000, 1000)]


def test_400000_empty_texts_cost_milliseconds_not_seconds(client):
    """A loop of 400,000 text("") stops at the cap: the cell fails fast with the RangeError.

    Fast is the worker's CPU time (the guest stopped at entry 10,001), not the wall clock, which a loaded
    machine stretches."""
    env = run(client, 'for (let i = 0; i < 400000; i++) text(""); return 1', max_output_bytes=1024 * 1024)
    assert env["status"] == "failed" and env["error"].startswith("RangeError: too many output entries"), env
    assert len(env["output"]) == 10000
    assert env["telemetry"]["guest_cpu_ms"] < 1000, env["telemetry"]
