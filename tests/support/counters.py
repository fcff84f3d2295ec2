"""Counting calls instead of timing them: a test proves "no work was done" or "built once" by a count."""

from __future__ import annotations

import functools
from typing import Any

import pytest

#: The one kind of behaviour only a clock shows: a regex engine that backtracks. `^(a+)+$` against 40
#: a's and a `!` costs a backtracking engine about 2**40 steps (hours); a linear one, microseconds.
#: Only backtracking reaches this deadline, however loaded the machine.
BACKTRACKING_DEADLINE_S = 10.0


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[tuple[Any, ...]]:
    """Wrap ``owner.name`` (a function or method) so each call still runs it and appends its positional
    arguments to the returned list; ``monkeypatch`` restores the original after the test."""
    real = getattr(owner, name)
    calls: list[tuple[Any, ...]] = []

    @functools.wraps(real)
    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def json_objects(value: object) -> int:
    """How many JSON objects ``value`` holds, itself included (a bound on the subschemas of a schema)."""
    if isinstance(value, dict):
        return 1 + sum(json_objects(v) for v in value.values())
    if isinstance(value, list):
        return sum(json_objects(v) for v in value)
    return 0
