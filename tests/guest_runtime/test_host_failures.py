"""A Python cell's record of host failures (``HostFailures``): what ``error_info`` and the uncaught phase read."""

from __future__ import annotations

from guest_runtime.monty.host_requests import (
    MAX_KEPT_FAILURE_CHARS,
    MAX_KEPT_FAILURES,
    HostFailures,
    exception_head,
    host_error,
)


def _failed(record: HostFailures, message: str, code: str = "tool_error", **extra: object) -> str:
    error = {"message": message, "code": code, **extra}
    exception = host_error(error)
    record.record(exception, error, len(message) + 64)
    return exception_head(exception)


def test_a_host_failure_is_known_by_the_head_of_the_exception_the_guest_got():
    """The fields come back by the exception's ``Name: message``; the message is the host's, without the code."""
    record = HostFailures()
    head = _failed(record, "no", tool="fail", effectStatus="unknown", details=None)
    assert head == "RuntimeError: no (code: tool_error)"
    assert record.info(head) == {"message": "no", "code": "tool_error", "tool": "fail", "effectStatus": "unknown"}
    assert record.code(head) == "tool_error"
    assert record.info("RuntimeError: no") is None and record.code("ValueError: x") is None


def test_the_record_is_bounded_by_count_and_by_characters():
    """A cell failing call after call keeps the latest failures only: the oldest go first."""
    record = HostFailures()
    heads = [_failed(record, f"failure {i}") for i in range(MAX_KEPT_FAILURES + 10)]
    assert record.info(heads[0]) is None and record.info(heads[9]) is None
    assert record.info(heads[10]) is not None and record.info(heads[-1]) is not None
    big = [_failed(record, f"{i}" + "x" * (MAX_KEPT_FAILURE_CHARS // 3)) for i in range(4)]
    assert record.info(big[0]) is None and record.info(heads[-1]) is None
    assert record.info(big[-1]) is not None
