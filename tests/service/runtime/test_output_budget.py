"""Output budget end to end (SPEC §5, reference items 32-36): markers, legs, failures."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import run, wait

GUIDANCE = "Output truncated; rerun with narrower args."


def compact(value: Any) -> str:
    """Compact JSON as the guest's JSON.stringify writes it (no spaces, non-ASCII raw)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def size(value: Any) -> int:
    """UTF-8 bytes of a value's compact JSON."""
    return len(compact(value).encode("utf-8"))


def list_cost(output: list[Any]) -> int:
    """What a delivered output list costs against the budget (an empty list costs nothing)."""
    return size(output) if output else 0


def assert_marker_of(marker: Any, original: str) -> None:
    """``marker`` is a truncation marker whose prefix/omittedBytes describe ``original`` exactly."""
    assert isinstance(marker, dict) and marker.get("truncated") is True, marker
    assert set(marker) == {"truncated", "prefix", "omittedBytes", "guidance"}, marker
    prefix = marker["prefix"]
    assert original.startswith(prefix), (prefix[:80], original[:80])
    assert marker["omittedBytes"] == len(original.encode("utf-8")) - len(prefix.encode("utf-8"))
    assert marker["omittedBytes"] > 0


# A value with multi-byte characters, quotes, backslashes and newlines: the cut must stay safe.
BIG_ROWS_JS = 'Array.from({length: 400}, (_, i) => ({i, s: "é\\"\\\\\\n€", t: "𝄞"}))'
BIG_ROWS = [{"i": i, "s": 'é"\\\n€', "t": "𝄞"} for i in range(400)]


def test_oversized_value_becomes_exact_marker_within_budget(client):
    """An oversized headless value becomes a marker: prefix of its compact JSON, exact omittedBytes, fits."""
    env = run(client, f"return {BIG_ROWS_JS};", headless=True, max_output_bytes=2048)
    assert env["status"] == "completed", env
    marker = env["value"]
    original = compact(BIG_ROWS)
    assert_marker_of(marker, original)
    assert marker["guidance"] == GUIDANCE
    assert "reference" not in marker
    assert size(marker) + list_cost(env["output"]) <= 2048
    assert len(marker["prefix"].encode("utf-8")) > 1024  # the marker uses the budget, not an empty prefix


def test_value_that_fits_is_returned_whole(client):
    """A value under the budget is returned as is, no marker."""
    env = run(client, "return Array.from({length: 50}, (_, i) => i);", headless=True, max_output_bytes=1024)
    assert env["status"] == "completed"
    assert env["value"] == list(range(50))


def test_output_delivered_incrementally_exactly_once(client):
    """Each leg's envelope carries only the entries emitted since the previous one, each exactly once."""
    code = """
    text("a"); json({n: 1});
    await yield_control("one");
    text("b");
    await yield_control("two");
    console.log("c");
    return "done";
    """
    env = run(client, code)
    assert env["status"] == "waiting" and env["reason"] == "yield", env
    assert env["output"] == [{"type": "text", "text": "a"}, {"type": "json", "value": {"n": 1}}]
    env = wait(client, env["cell_id"])
    assert env["status"] == "waiting"
    assert env["output"] == [{"type": "text", "text": "b"}]
    env = wait(client, env["cell_id"])
    assert env["status"] == "completed"
    assert env["value"] == "done"
    assert [e.get("text") for e in env["output"]] == ["c"]


def test_failing_resumed_cell_returns_only_new_output(client):
    """A cell that fails after a wait returns only the output emitted in that leg."""
    env = run(client, 'text("first"); await yield_control(); text("second"); throw new Error("late failure");')
    assert env["output"] == [{"type": "text", "text": "first"}]
    env = wait(client, env["cell_id"])
    assert env["status"] == "failed"
    assert env["output"] == [{"type": "text", "text": "second"}]
    assert env["error"].startswith("Error: late failure")


def test_cumulative_budget_across_legs(client):
    """All output across legs plus the final value fits one max_output_bytes budget."""
    budget = 4096
    code = """
    text("a".repeat(1000));
    await yield_control();
    text("b".repeat(1000));
    await yield_control();
    text("c".repeat(1000));
    return "v".repeat(3000);
    """
    envs = [run(client, code, headless=True, max_output_bytes=budget)]
    while envs[-1]["status"] == "waiting":
        envs.append(wait(client, envs[-1]["cell_id"]))
    final = envs[-1]
    assert final["status"] == "completed", final
    spent = sum(list_cost(e["output"]) for e in envs) + size(final["value"])
    assert spent <= budget, spent
    # The first legs fit whole; the final leg cannot carry 1 KB of output plus a 3 KB value.
    assert envs[0]["output"] == [{"type": "text", "text": "a" * 1000}]
    assert envs[1]["output"] == [{"type": "text", "text": "b" * 1000}]
    assert final["value"] != "v" * 3000
    assert_marker_of(final["value"], compact("v" * 3000))


def test_marker_describes_original_output_across_legs(client):
    """Output markers in later legs are projected from the original entries, never from an earlier marker."""
    big = 'é€"\\\n' * 900  # ~9 KB of escapes and multi-byte text
    code = f"""
    text({json.dumps(big)});
    await yield_control();
    return 1;
    """
    budget = 2048
    first = run(client, code, max_output_bytes=budget)
    assert first["status"] == "waiting", first
    original = compact([{"type": "text", "text": big}])
    assert len(first["output"]) == 1
    assert_marker_of(first["output"][0], original)
    final = wait(client, first["cell_id"])
    assert final["status"] == "completed" and final["value"] == 1
    assert len(final["output"]) == 1
    assert_marker_of(final["output"][0], original)  # not a prefix of '[{"truncated":true,...'
    assert final["output"][0]["prefix"].startswith('[{"type":"text","text":"é€')
    assert size(final["output"]) + size(final["value"]) <= budget


def test_unchanged_marker_is_not_resent(client):
    """A wait whose output marker would be identical to the last one sends no output."""
    code = """
    text("z".repeat(6000));
    await yield_control();
    await yield_control();
    return null;
    """
    first = run(client, code, max_output_bytes=2048)
    assert first["status"] == "waiting" and first["output"][0]["truncated"] is True
    second = wait(client, first["cell_id"])
    assert second["status"] == "waiting"
    assert second["output"] == []
    final = wait(client, first["cell_id"])
    assert final["status"] == "completed" and final["value"] is None
    # The final leg has more room than the waiting legs, so it may send a longer marker; never the same one.
    assert final["output"] != first["output"]


def test_output_before_failure_is_preserved(client):
    """Output emitted before an error is kept in the failed envelope (phase guest, no dispatch)."""
    env = run(client, 'text("before"); json({step: 1}); const o = null; o.boom;')
    assert env["status"] == "failed"
    assert env["output"] == [{"type": "text", "text": "before"}, {"type": "json", "value": {"step": 1}}]
    assert env["failure_phase"] == "guest"
    assert env["bridge_dispatch_started"] is False
    assert env["error"].startswith("TypeError")


def test_oversized_error_keeps_leading_cause(client):
    """An error larger than the budget keeps its leading cause, ends with [error truncated] and stays failed."""
    budget = 1024
    env = run(
        client,
        'text("ctx"); throw new Error("leading cause: disk on fire " + "é".repeat(5000));',
        max_output_bytes=budget,
    )
    assert env["status"] == "failed"
    error = env["error"]
    assert error.startswith("Error: leading cause: disk on fire")
    assert error.endswith("[error truncated]")
    assert len(error.encode("utf-8")) + list_cost(env["output"]) <= budget
    assert env["output"] == [{"type": "text", "text": "ctx"}]


def test_oversized_error_after_large_output_stays_failed(client):
    """With output and error both oversized the cell still fails and the whole envelope fits the budget."""
    budget = 1024
    env = run(
        client,
        'text("o".repeat(4000)); throw new RangeError("cause first " + "x".repeat(4000));',
        max_output_bytes=budget,
    )
    assert env["status"] == "failed"
    assert env["error"].startswith("RangeError: cause first")
    assert env["error"].endswith("[error truncated]")
    assert len(env["output"]) == 1
    assert_marker_of(env["output"][0], compact([{"type": "text", "text": "o" * 4000}]))
    assert len(env["error"].encode("utf-8")) + list_cost(env["output"]) <= budget


def test_nested_tool_data_is_not_truncated_by_the_output_budget(client):
    """A tool reply far over max_output_bytes reaches the guest whole; only the cell's own result is bounded."""
    code = "const r = await blob({size: 100000}); return {length: r.data.length, tail: r.data.slice(-3)};"
    env = run(client, code, max_output_bytes=1024)
    assert env["status"] == "completed", env.get("error", env)
    assert env["value"] == {"length": 100000, "tail": "xxx"}
