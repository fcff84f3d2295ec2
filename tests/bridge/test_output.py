"""Bounded output capture and the per-cell projection across exec/wait legs."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import orjson
import pytest

from bridge import jsoncodec
from bridge.errors import InvalidSource, OutputLimitExceeded, OutputStateClosed
from bridge.output import (
    CAPTURE_SLACK_BYTES,
    MAX_OUTPUT_ENTRIES,
    REFERENCE_GUIDANCE,
    FinalError,
    FinalValue,
    NotRetained,
    OutputCapture,
    OutputState,
    Projection,
    capture_value,
    check_json,
)
from bridge.refs import describe_reference
from bridge.truncation import ERROR_TRUNCATED_SUFFIX, TRUNCATION_GUIDANCE, json_size, utf8_size


def text_entry(text: str) -> str:
    """Compact JSON of a text output entry, as the worker produces it."""
    return orjson.dumps({"type": "text", "text": text}).decode()


def json_value(value: Any) -> FinalValue:
    """A completed final built from a whole value."""
    return FinalValue(capture_value(orjson.dumps(value).decode(), 10 * 1024 * 1024))


def array_text(entries: list[str]) -> str:
    """Compact JSON of the output array the entries form."""
    return "[" + ",".join(entries) + "]"


def leg_cost(projection: Any) -> int:
    """Bytes one envelope's output + value/error occupy."""
    cost = json_size(projection.output) if projection.output else 0
    if projection.error is not None:
        cost += utf8_size(projection.error)
    elif projection.value is not None:
        cost += json_size(projection.value)
    return cost


def project(state: OutputState, final: Any = None, retain: Any = None) -> Projection:
    """``state.project`` as a cell does it: the texts it embeds checked first (``unchecked``, ``checked``), and
    the embedded entries and value read back as data (an envelope keeps them encoded)."""
    for text in state.unchecked(final):
        check_json(text)
    state.checked(final)
    projection = state.project(final, retain)
    return dataclasses.replace(projection, output=decoded(projection.output), value=decoded(projection.value))


def decoded(data: Any) -> Any:
    """``data`` with its encoded parts (``jsoncodec.fragment``) decoded, as a caller of the envelope sees it."""
    return None if data is None else jsoncodec.loads(jsoncodec.dumps(data))


def run_legs(max_bytes: int, legs: list[list[str]], final: Any = None, retain: Any = None):
    """Feed legs of entries through a capture and a state; return every leg's projection."""
    capture, state, projections = OutputCapture(max_bytes), OutputState(max_bytes), []
    for index, leg in enumerate(legs):
        for entry in leg:
            capture.add(entry)
        state.extend(capture.drain())
        last = index == len(legs) - 1
        projections.append(project(state, final if last else None, retain if last else None))
    return state, projections


# ------------------------------------------------------------------ capture


def test_capture_ships_entries_whole_under_the_cap() -> None:
    """Entries under the cap travel as complete JSON text."""
    capture = OutputCapture(1024)
    capture.add(text_entry("a"))
    capture.add(text_entry("b"))
    assert capture.drain() == [{"json": text_entry("a")}, {"json": text_entry("b")}]
    assert capture.drain() == []


def test_capture_of_fifty_megabytes_ships_only_the_cap() -> None:
    """A 50 MB logical output ships at most max + slack bytes of data, then sizes only."""
    max_bytes = 65536
    capture = OutputCapture(max_bytes)
    big = text_entry("x" * (1024 * 1024 - 30))
    shipped, items = 0, []
    for leg in range(5):
        for _ in range(10):
            capture.add(big)
        for _ in range(1000):
            capture.add(text_entry("small"))
        drained = capture.drain()
        items.extend(drained)
        shipped += sum(utf8_size(i.get("json", "")) + utf8_size(i.get("prefix", "")) for i in drained)
        assert len(drained) <= 2 if leg else len(drained) <= 3
    assert capture.total_bytes > 50 * 1000 * 1000
    assert shipped <= max_bytes + CAPTURE_SLACK_BYTES
    counted = sum(i["bytes"] for i in items if "json" not in i)
    assert counted + sum(utf8_size(i["json"]) for i in items if "json" in i) == capture.total_bytes
    assert sum(i.get("entries", 1) for i in items) == capture.total_entries == 5 * 1010


def test_capture_partial_item_is_a_safe_prefix() -> None:
    """The entry that crosses the cap ships a JSON-safe prefix and its true size."""
    capture = OutputCapture(1024, slack_bytes=0)
    entry = text_entry("é\n🦞" * 400)
    capture.add(entry)
    (item,) = capture.drain()
    assert item["bytes"] == utf8_size(entry)
    assert entry.startswith(item["prefix"]) and 1020 <= utf8_size(item["prefix"]) <= 1024


def test_capture_of_many_tiny_entries_is_bounded_in_items() -> None:
    """After overflow, any number of entries collapses into one size-only item per drain."""
    capture = OutputCapture(1024)
    for i in range(100_000):
        capture.add(text_entry(str(i)))
    items = capture.drain()
    assert len(items) <= (1024 + CAPTURE_SLACK_BYTES) // len(text_entry("0")) + 2
    assert items[-1]["entries"] + sum(1 for i in items[:-1]) == 100_000


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("[1,2,3]", 7, {"json": "[1,2,3]"}),
        ("[1,2,3]", 4, {"prefix": "[1,2", "bytes": 7}),
        ('"é\\u00e9"', 5, {"prefix": '"é', "bytes": 10}),
    ],
)
def test_capture_value(text: str, limit: int, expected: dict) -> None:
    """The final value ships whole within the limit, else as a safe prefix plus its size."""
    assert capture_value(text, limit) == expected


# ------------------------------------------------------------------ single leg


def test_small_output_and_value_are_delivered_whole() -> None:
    """Output and value within budget arrive unchanged."""
    _, (projection,) = run_legs(
        1024, [[text_entry("hi"), '{"type":"json","value":{"a":[1,2]}}']], json_value({"ok": True})
    )
    assert projection.output == [{"type": "text", "text": "hi"}, {"type": "json", "value": {"a": [1, 2]}}]
    assert projection.value == {"ok": True}
    assert not (projection.output_truncated or projection.value_truncated)


def test_oversized_value_is_a_success_marker() -> None:
    """An oversized value becomes a truncation marker, not a failure."""
    value = {"rows": ["é🦞" * 10 for _ in range(200)]}
    text = orjson.dumps(value).decode()
    _, (projection,) = run_legs(2048, [[]], json_value(value))
    marker = projection.value
    assert projection.error is None and projection.value_truncated
    assert text.startswith(marker["prefix"])
    assert marker["omittedBytes"] == utf8_size(text) - utf8_size(marker["prefix"])
    assert json_size(marker) <= 2048


@pytest.mark.parametrize("max_bytes", [1024, 1500, 4096, 65536])
@pytest.mark.parametrize("output_kb", [0, 1, 3, 200])
@pytest.mark.parametrize("value_kb", [0, 1, 3, 200])
def test_every_projection_fits_the_budget(max_bytes: int, output_kb: int, value_kb: int) -> None:
    """Output plus value never exceed max_output_bytes, whatever their sizes."""
    entries = [text_entry("ü" * 100) for _ in range(output_kb * 10)]
    value = ["v" * 100] * (value_kb * 10)
    _, (projection,) = run_legs(max_bytes, [entries], json_value(value))
    assert leg_cost(projection) <= max_bytes


# ------------------------------------------------------------------ multiple legs


def test_entries_are_delivered_exactly_once_across_legs() -> None:
    """Each leg carries only entries not delivered before; all arrive once, in order."""
    legs = [[text_entry(f"leg{leg}-{i}") for i in range(3)] for leg in range(4)]
    _, projections = run_legs(65536, legs, json_value(7))
    delivered = [e["text"] for p in projections for e in p.output]
    assert delivered == [f"leg{leg}-{i}" for leg in range(4) for i in range(3)]
    assert projections[-1].value == 7


def test_waits_without_new_output_deliver_nothing() -> None:
    """A wait after everything was delivered returns an empty output list."""
    _, projections = run_legs(4096, [[text_entry("once")], [], []], json_value(None))
    assert [p.output for p in projections] == [[{"type": "text", "text": "once"}], [], []]


def test_marker_describes_original_output_across_legs() -> None:
    """exec->wait: the marker's prefix and omittedBytes describe the original blocks."""
    first, second = text_entry("🦞" * 140), text_entry("é" * 240)
    _, (exec_leg, wait_leg) = run_legs(1024, [[first], [second]], json_value(True))
    original = array_text([first, second])
    marker = wait_leg.output[0]
    assert original.startswith(marker["prefix"]) and "é" in marker["prefix"]
    assert marker["omittedBytes"] == utf8_size(original) - utf8_size(marker["prefix"])
    assert wait_leg.value is True
    assert exec_leg.output_truncated and leg_cost(wait_leg) <= 1024


def test_unchanged_marker_is_not_resent() -> None:
    """A marker already delivered is not sent again when nothing new was output."""
    big = text_entry("z" * 3000)
    _, projections = run_legs(2048, [[big], [], [], [text_entry("more")]], None)
    assert projections[0].output[0]["truncated"] is True
    assert projections[1].output == [] and projections[2].output == []
    assert projections[1].output_truncated
    newer = projections[3].output[0]
    assert newer["omittedBytes"] > projections[0].output[0]["omittedBytes"]


def test_marked_output_is_delivered_whole_when_the_final_leg_has_room() -> None:
    """A marker stands for undelivered output that a later leg may still deliver whole."""
    entry = text_entry("q" * 700)
    _, (exec_leg, final_leg) = run_legs(1024, [[entry], []], json_value(1))
    assert exec_leg.output[0]["truncated"] is True
    assert final_leg.output == [{"type": "text", "text": "q" * 700}]


def test_cumulative_output_across_yields_shares_one_budget() -> None:
    """Waiting legs never commit more than the budget minus the final reserve."""
    capture, state = OutputCapture(4096), OutputState(4096)
    delivered = []
    for _ in range(20):
        capture.add(text_entry("w" * 150))
        state.extend(capture.drain())
        projection = project(state)
        assert state.committed_bytes <= 4096 - 1024
        assert projection.output_deferred == (projection.output == [])
        delivered.extend(projection.output)
    final = project(state, json_value("end"))
    assert final.value == "end" and len(delivered) < 20
    assert len(delivered) + len(final.output) == 20  # deferred output arrives with the final leg
    assert state.committed_bytes + (json_size(final.output) if final.output_truncated else 0) + 5 <= 4096


@pytest.mark.parametrize("seed", range(25))
def test_random_legs_keep_the_invariant(seed: int) -> None:
    """For random legs, committed + view <= max on every leg; whole entries arrive once in order."""
    rng = random.Random(seed)
    max_bytes = rng.choice([1024, 1500, 3000, 8192])
    alphabet = 'aé€🦞\n"\\'
    legs = [
        [
            text_entry("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400))))
            for _ in range(rng.randint(0, 6))
        ]
        for _ in range(rng.randint(1, 6))
    ]
    final = rng.choice([json_value({"k": "v" * rng.randint(0, 3000)}), FinalError("Error: " + "e" * 3000)])
    capture, state = OutputCapture(max_bytes), OutputState(max_bytes)
    whole: list[str] = []
    for index, leg in enumerate(legs):
        for entry in leg:
            capture.add(entry)
        state.extend(capture.drain())
        last = index == len(legs) - 1
        projection = project(state, final if last else None)
        marker_cost = json_size(projection.output) if projection.output_truncated and projection.output else 0
        final_cost = 0
        if projection.error is not None:
            final_cost = utf8_size(projection.error)
        elif last:
            final_cost = json_size(projection.value)
        assert state.committed_bytes + marker_cost + final_cost <= max_bytes
        if not last:
            assert state.committed_bytes <= max_bytes - min(1024, max_bytes // 2)
        whole.extend(orjson.dumps(e).decode() for e in projection.output if "truncated" not in e)
    all_entries = [e for leg in legs for e in leg]
    assert whole == all_entries[: len(whole)]
    if isinstance(final, FinalError):
        assert projection.error is not None


# ------------------------------------------------------------------ failures


def test_error_truncation_keeps_cause_and_stays_a_failure() -> None:
    """An oversized error keeps its leading cause, ends with the suffix, and is still an error."""
    message = "ReferenceError: missingFn is not defined\n" + "    at frame (cell.js:1:1)\n" * 400
    entries = [text_entry("o" * 200) for _ in range(20)]
    _, (projection,) = run_legs(2048, [entries], FinalError(message))
    assert projection.error.startswith("ReferenceError: missingFn is not defined")
    assert projection.error.endswith(ERROR_TRUNCATED_SUFFIX) and projection.error_truncated
    assert projection.value is None and projection.output_truncated
    assert leg_cost(projection) <= 2048
    assert utf8_size(projection.error) >= 1024  # at least half the budget when output is large


def test_output_before_a_failure_is_preserved() -> None:
    """Output emitted before a failure is delivered with the error."""
    _, (projection,) = run_legs(4096, [[text_entry("before")]], FinalError("Error: boom"))
    assert projection.output == [{"type": "text", "text": "before"}]
    assert projection.error == "Error: boom" and not projection.error_truncated


def test_failing_resumed_cell_returns_only_new_output() -> None:
    """After a wait, a failure returns only output not delivered before."""
    _, (first, second) = run_legs(4096, [[text_entry("a")], [text_entry("b")]], FinalError("Error: x"))
    assert first.output == [{"type": "text", "text": "a"}]
    assert second.output == [{"type": "text", "text": "b"}] and second.error == "Error: x"


# ------------------------------------------------------------------ automatic references


def big_object() -> dict:
    """A tool-shaped result far over small budgets."""
    rows = [{"id": i, "name": f"row {i}", "tags": ["x", "y"]} for i in range(180)]
    content = [{"type": "text", "text": "ok"}]
    return {"content": content, "structuredContent": {"rows": rows}, "isError": False}


def test_oversized_object_is_saved_as_a_reference() -> None:
    """A truncated object/array value becomes {truncated, reference, guidance} via retain."""
    calls: list[str] = []

    def retain(text: str):
        calls.append(text)
        return describe_reference("result_" + "1" * 36, text)

    value = big_object()
    _, (projection,) = run_legs(4096, [[text_entry("hi")]], json_value(value), retain)
    assert calls == [orjson.dumps(value).decode()]
    assert projection.value["truncated"] is True
    assert projection.value["guidance"] == REFERENCE_GUIDANCE
    assert projection.value["reference"]["id"] == "result_" + "1" * 36
    assert projection.reference_id == "result_" + "1" * 36 and projection.release_reference_id is None
    assert leg_cost(projection) <= 4096


def test_reference_descriptor_shrinks_to_a_small_budget() -> None:
    """At the minimum budget with large output the descriptor shrinks but keeps its id."""
    rid = "result_" + "2" * 36
    entries = [text_entry("o" * 500) for _ in range(10)]
    _, (projection,) = run_legs(1024, [entries], json_value(big_object()), lambda text: describe_reference(rid, text))
    assert projection.value["reference"]["id"] == rid
    assert leg_cost(projection) <= 1024


def test_not_retained_gives_a_plain_marker_with_the_reason() -> None:
    """When retain refuses, the value is a plain marker whose guidance says why."""
    _, (projection,) = run_legs(
        2048, [[]], json_value(big_object()), lambda text: NotRetained("result-store capacity reached (64 entries)")
    )
    marker = projection.value
    assert marker["guidance"].startswith("Not retained: result-store capacity reached")
    assert "reference" not in marker and "prefix" in marker and projection.error is None


def test_reference_too_big_for_the_budget_is_released() -> None:
    """A descriptor that cannot fit is reported for release and a plain marker is shown."""
    _, (projection,) = run_legs(1024, [[]], json_value(big_object()), lambda text: {"id": "result_" + "9" * 2000})
    assert projection.release_reference_id == "result_" + "9" * 2000
    assert projection.reference_id is None
    assert projection.value["guidance"].startswith("Not retained: reference exceeds output budget")
    assert json_size(projection.value) <= 1024


@pytest.mark.parametrize("value", ["s" * 5000, 12345, [1, 2, 3]])
def test_retain_is_only_used_for_truncated_objects_and_arrays(value: Any) -> None:
    """Scalars and values that fit are never retained."""
    calls: list[str] = []

    def retain(text: str):
        calls.append(text)
        return NotRetained("unused")

    _, (projection,) = run_legs(2048, [[]], json_value(value), retain)
    assert calls == []
    assert projection.reference_id is None


def test_value_beyond_the_capture_is_not_retained() -> None:
    """A value that the worker could only capture partially is not retained."""
    text = orjson.dumps(big_object()).decode()
    calls: list[str] = []
    state = OutputState(2048)
    projection = project(state, FinalValue(capture_value(text, 4000)), lambda t: calls.append(t))
    assert calls == []
    assert projection.value["guidance"].startswith("Not retained: result exceeds the capture allowance")
    assert projection.value["omittedBytes"] == utf8_size(text) - utf8_size(projection.value["prefix"])


def test_plain_marker_without_retain_uses_the_default_guidance() -> None:
    """Headless/restart-safe cells (no retain) get the ordinary marker."""
    _, (projection,) = run_legs(1024, [[]], json_value(big_object()))
    assert projection.value["guidance"] == TRUNCATION_GUIDANCE


# ------------------------------------------------------------------ contract errors


@pytest.mark.parametrize(
    "item",
    [None, "text", {}, {"json": 5}, {"bytes": -1}, {"prefix": "abc", "bytes": 1}, {"bytes": 3, "entries": 0}],
)
def test_malformed_source_items_are_refused(item: Any) -> None:
    """A malformed source item raises InvalidSource with a stable code."""
    with pytest.raises(InvalidSource) as caught:
        OutputState(1024).extend([item])
    assert caught.value.code == "output_invalid_source"


def test_entries_that_are_not_json_are_refused() -> None:
    """Complete entries must parse as JSON when delivered."""
    state = OutputState(1024)
    state.extend([{"json": "{not json"}])
    with pytest.raises(InvalidSource):
        project(state)


def test_state_is_closed_after_the_final_projection() -> None:
    """After the final projection neither extend nor project is accepted."""
    state = OutputState(1024)
    project(state, FinalError("Error: x"))
    with pytest.raises(OutputStateClosed):
        state.extend([])
    with pytest.raises(OutputStateClosed):
        project(state)


def test_output_limit_exceeded_only_when_no_bounded_projection_exists() -> None:
    """With a budget too small for any marker, the value raises output_limit_exceeded."""
    state = OutputState(60)
    with pytest.raises(OutputLimitExceeded) as caught:
        project(state, json_value("x" * 500))
    assert caught.value.code == "output_limit_exceeded"


# ------------------------------------------------------------------ entry cap


def test_capture_keeps_only_the_size_of_entries_past_the_entry_cap() -> None:
    """Past MAX_OUTPUT_ENTRIES entries only sizes travel, however much byte budget is left."""
    capture = OutputCapture(10 * 1024 * 1024)
    for _ in range(MAX_OUTPUT_ENTRIES + 3):
        capture.add(text_entry(""))
    items = capture.drain()
    assert len(items) == MAX_OUTPUT_ENTRIES + 1
    assert all(item == {"json": text_entry("")} for item in items[:-1])
    assert items[-1] == {"bytes": 3 * utf8_size(text_entry("")), "entries": 3}


def test_state_keeps_the_text_of_at_most_the_entry_cap() -> None:
    """The host re-checks the cap: entries past it are reported in an exact truncation marker."""
    entries = [text_entry(str(i)) for i in range(MAX_OUTPUT_ENTRIES + 2)]
    state = OutputState(10 * 1024 * 1024)
    state.extend([{"json": e} for e in entries])
    projection = project(state, json_value(1))
    marker = projection.output[0]
    assert projection.output_truncated and len(projection.output) == 1
    assert marker["omittedBytes"] == utf8_size(array_text(entries)) - utf8_size(marker["prefix"])
    assert array_text(entries).startswith(marker["prefix"])
    assert marker["prefix"] == "[" + ",".join(entries[:MAX_OUTPUT_ENTRIES]) + ","  # nothing past the cap


def test_state_delivers_exactly_the_entry_cap_whole() -> None:
    """MAX_OUTPUT_ENTRIES entries within the byte budget are delivered whole, in order."""
    entries = [text_entry(str(i)) for i in range(MAX_OUTPUT_ENTRIES)]
    state = OutputState(10 * 1024 * 1024)
    state.extend([{"json": e} for e in entries])
    projection = project(state, json_value(1))
    assert not projection.output_truncated
    assert [o["text"] for o in projection.output] == [str(i) for i in range(MAX_OUTPUT_ENTRIES)]


def test_numbers_javascript_writes_in_full_are_measured_as_the_host_writes_them() -> None:
    """JS writes 174680538877714140000 (21 bytes), the envelope 1.7468053887771414e+20 (22): entries and the
    final value are measured as sent, so a budget that fits the guest's text exactly is never overrun."""
    pad = text_entry("x" * 1000)
    js_entry = '{"type":"json","value":[174680538877714140000,-92233720368547758090,"12345678901234567890"]}'
    js_value = "[123456789012345678900,1.5e-7]"
    sent = [orjson.dumps(orjson.loads(t)).decode() for t in (js_entry, js_value)]
    assert len(sent[0]) > len(js_entry) and len(sent[1]) > len(js_value)  # the case this guards
    guest_total = len(array_text([pad, js_entry])) + len(js_value)
    final = FinalValue(capture_value(js_value, 1 << 20))
    _, (projection,) = run_legs(guest_total, [[pad, js_entry]], final)
    assert leg_cost(projection) <= guest_total  # before, everything was shown: 4 bytes over
    assert projection.output_truncated or projection.value_truncated
    sent_total = len(array_text([pad, sent[0]])) + len(sent[1])
    _, (projection,) = run_legs(sent_total, [[pad, js_entry]], FinalValue(capture_value(js_value, 1 << 20)))
    assert leg_cost(projection) == sent_total and not projection.output_truncated  # all shown, as sent
    assert capture_value("[1,2]", 100) == {"json": "[1,2]"}  # ordinary text is kept as it is
