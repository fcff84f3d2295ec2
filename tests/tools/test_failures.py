"""The tool failure contract in isolation: the flip and reason order, partial successes, the run ledger, the breaker."""

from __future__ import annotations

import pytest

from service.tools.errors import FailureBudgetError, ToolDisabledError
from service.tools.failures import failure_of, warning_of_result
from service.tools.result import ToolResult
from service.tools.run_budget import Breaker, FailureLimits, RunLedger, RunState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def failure(details: object, *, is_error: bool = False, text: str | None = None):
    result = ToolResult(details=details, text=text, is_error=is_error)  # as a tool returns it
    return failure_of(result.details, result.text, result.is_error, "t", untrusted=False)


def test_reason_order_follows_the_seed():
    """success: false reads stderr -> error -> msg -> user_message; ok: false reads error -> msg only."""
    assert failure({"success": False, "msg": "m", "error": "e", "stderr": "s"}).message == "t failed: s"
    assert failure({"success": False, "msg": "m", "user_message": "u"}).message == "t failed: m"
    assert failure({"success": False, "user_message": "u"}).message == "t failed: u"
    assert failure({"ok": False, "msg": "m", "error": "e"}).message == "t failed: e"
    assert failure({"ok": False, "stderr": "s"}).message.startswith("t failed: t reported a failure without")
    assert failure({"success": False, "error": {"message": "nested"}}).message == "t failed: nested"


def test_only_false_flips():
    """A missing or None flag, a falsy non-bool and a code field are no failure."""
    for details in ({"success": None}, {"ok": 0}, {"code": 500}, {"success": True}, [False], None):
        assert failure(details) is None


def test_error_result_uses_its_text():
    flagged = failure({"n": 1}, is_error=True, text="carrier offline")
    assert flagged.message == "t failed: carrier offline" and flagged.reported == {"n": 1, "message": "carrier offline"}


def test_recoverable_kinds_and_non_retriable():
    """Four error_type values or a need_param key are recoverable; non_retriable is ignored on them."""
    for kind in ("recoverable", "retryable", "need_input", "need_param"):
        got = failure({"success": False, "error_type": kind, "non_retriable": True})
        assert got.recoverable and not got.non_retriable and got.fields["errorType"] == "recoverable"
        assert got.fields["nonRetriable"] is False
    keyed = failure({"ok": False, "need_param": "city"})
    assert keyed.recoverable and keyed.fields == {"errorType": "recoverable", "needParam": "city"}
    hard = failure({"success": False, "error_type": "config", "non_retriable": True})
    assert not hard.recoverable and hard.non_retriable and hard.fields["errorType"] == "config"
    assert "errorType" not in failure({"success": False, "error_type": "weird"}).fields


def test_partial_success_warnings():
    assert warning_of_result({"success": True, "warning": "3 skipped"}, "t") == "t succeeded only in part: 3 skipped"
    assert warning_of_result({"success": True, "completed": False}, "t").startswith("t succeeded only in part")
    assert warning_of_result({"success": True, "completed": True}, "t") is None
    assert warning_of_result({"completed": False}, "t") is None


def test_ledger_blocks_a_tool_at_its_limit_and_the_run_at_its_budget():
    """A tool is blocked at tool_failures_per_run counted failures, or at once by a non-retriable one;
    at failures_per_run every tool is refused."""
    ledger = RunLedger(RunState(), FailureLimits(2, 3))
    for _ in range(2):
        ledger.check("a")
        ledger.state.count("a", None)
    with pytest.raises(ToolDisabledError, match="failed 2 times"):
        ledger.check("a")
    ledger.check("b")
    ledger.state.count("b", "it reported a failure that retrying cannot fix (non_retriable): no key")
    assert ledger.blocked() == {"a", "b"}
    with pytest.raises(FailureBudgetError):
        ledger.check("c")


def test_breaker_lets_two_calls_retry_unless_the_last_two_failed():
    """At most two calls of a tool retry at once; after two failed calls (within 30 minutes) none do."""
    clock = Clock()
    breaker = Breaker(clock=clock)
    assert breaker.start_retry("t", "x") and breaker.start_retry("t", "x")
    assert not breaker.start_retry("t", "x")  # two are retrying already
    assert breaker.start_retry("other", "x")  # another tenant's calls are counted apart
    for _ in range(2):
        breaker.end_retry("t", "x")
        breaker.record("t", "x", ok=False)
    assert not breaker.start_retry("t", "x")  # the last two calls failed
    clock.now += 30 * 60 + 1
    assert breaker.start_retry("t", "x")  # those failures are older than 30 minutes
    breaker.end_retry("t", "x")
    breaker.record("t", "x", ok=False)
    breaker.record("t", "x", ok=True)
    assert breaker.start_retry("t", "x") and not breaker.start_retry("t", "x")  # one failure among the last two


def test_breaker_skipping_successes_keeps_every_verdict():
    """The breaker records a success only where it can push a failure out: over every sequence of
    five outcomes, its retry verdict is the one the plain "last two calls" rule gives."""
    for n in range(6):
        for bits in range(2**n):
            outcomes = [bool(bits >> i & 1) for i in range(n)]
            breaker = Breaker(clock=Clock())
            for ok in outcomes:
                breaker.record("t", "x", ok=ok)
            failed_in_last_two = sum(1 for ok in outcomes[-2:] if not ok)
            assert breaker.start_retry("t", "x") == (failed_in_last_two < 2), outcomes


def test_taking_a_place_gives_the_verdict_of_check():
    """With no call in flight, ``take`` refuses exactly where ``check`` does and holds a place otherwise;
    with every place left held, it gives none (the caller waits) until one is released."""
    ledger = RunLedger(RunState(), FailureLimits(2, 5))
    ledger.state.count("a", None)
    ledger.state.count("a", None)  # a: blocked at 2
    ledger.state.count("b", None)
    with pytest.raises(ToolDisabledError):
        ledger.take("a")
    place = ledger.take("b")
    assert place is not None and ledger.state.held == {"b": 1}
    assert ledger.take("b") is None  # b's one failure plus one in flight reach its limit of 2
    other = ledger.take("c")
    assert other is not None
    assert ledger.take("d") is None  # 3 failures counted and 2 in flight reach the run's budget of 5
    with other:
        pass
    last = ledger.take("d")
    assert last is not None
    for held in (place, last):
        with held:
            held.fail()
    assert ledger.state.held == {}
    with pytest.raises(FailureBudgetError):
        ledger.take("e")


def test_the_counters_read_as_one_view_before_and_after_a_count():
    """The run's view is the store's counters while nothing was counted here, and the sum after."""
    state = RunState()
    assert state.view() is state.seen and state.view().total == 0
    state.count("a", "why")
    assert state.view().failures == {"a": 1} and state.view().blocked == {"a": "why"}
    assert state.seen.failures == {}  # the store's counters are not changed by the sum
