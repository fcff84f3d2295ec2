"""A Python cell's value written as JSON by its Monty child (``cell_source``): same answer, fewer copies.

The cell's last expression is assigned to a name and the child writes it with ``json.dumps``; the worker
takes that text only when the host would write the same JSON, and otherwise reads the value and converts it
as before.  Every case runs in a real Monty child twice, rewritten and as written (``value_in_child=False``),
and must give the same value text, or the same failure with the same traceback.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.jsoncodec import MAX_NESTING, dumps_text, loads
from guest_runtime.engine import Failed, Returned, Waiting
from guest_runtime.errors import GuestRuntimeError
from guest_runtime.monty import cell_source, values
from guest_runtime.monty import engine as monty_engine
from guest_runtime.monty.cell_source import MAX_STATEMENT_CHARS, PREFIX, VALUE_NAME, Rewrite, rewritten
from guest_runtime.monty.engine import MontyPool, PythonEngine

CONFIG = dumps_text({"tools": [], "mcp": [], "maxRequestBytes": 1 << 20})


@pytest.fixture(scope="module")
def pool() -> Iterator[MontyPool]:
    pool = MontyPool()
    yield pool
    pool.close()


def _outcome(pool: MontyPool, code: str, value_in_child: bool) -> tuple[str, str]:
    """("value", its JSON text) or ("failed", the error text) of ``code`` run to its end in ``pool``'s child."""
    engine = PythonEngine(pool, value_in_child=value_in_child)
    engine.configure(CONFIG, 64 << 20)
    try:
        engine.compile(code, 10.0)
        end = engine.start(time.monotonic() + 10.0)
        if isinstance(end, Failed):
            return "failed", end.text
        assert isinstance(end, Returned), end
        return "value", engine.final_value(1 << 20, time.monotonic() + 10.0)
    except GuestRuntimeError as exc:
        return "failed", f"{type(exc).__name__}: {exc}"
    finally:
        engine.close()
        pool.tidy()


def _both_ways(pool: MontyPool, code: str, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, str], bool]:
    """The outcome as written, checked equal to the rewritten one; and whether the child's text was taken."""
    taken: list[bool] = []

    def spied(text: str) -> str | None:
        checked = values.child_text(text)
        taken.append(checked is not None)
        return checked

    with monkeypatch.context() as patched:
        patched.setattr(monty_engine, "child_text", spied)
        rewritten_outcome = _outcome(pool, code, True)
    written_outcome = _outcome(pool, code, False)
    assert _normal(rewritten_outcome) == _normal(written_outcome), code
    return written_outcome, any(taken)


def _normal(outcome: tuple[str, str]) -> tuple[str, str]:
    """A value's text with floats spelled one way (``1e+16`` and ``1e16`` are one number): read and written."""
    kind, text = outcome
    return (kind, dumps_text(loads(text))) if kind == "value" else outcome


def _nested(levels: int, leaf: str = "1", open_: str = "[", close: str = "]") -> str:
    return f"x = {leaf}\nfor _ in range({levels}):\n    x = {open_}x{close}\nx"


TAKEN = [
    "[1, 2.5, 'x', None, True, False]",
    "{'a': (1, (2, 3)), 'b': []}",
    "[2**53 + 1, -(10**18) + 1, 999999999999999999]",
    "[1e16, 1e-07, -0.0, 0.1 + 0.2, 1e308]",
    "['é\\u2028\\x7f\\x1f\"\\\\/', '\\U0001f600', '\\ud800']",  # a lone surrogate: U+FFFD both ways
    "{'Name': 1, 'Infinity and beyond': 2, 'nullable': 3}",
    "[{'id': i, 'name': f'item-{i}', 'ok': i % 2 == 0} for i in range(2000)]",
    "x = 3\nprint(x)",
    _nested(MAX_NESTING - 1),
]
CONVERTED = [
    "{1: 'x'}",  # keys json.dumps would make strings of: refused as before
    "{True: 1, None: 2}",
    "{'1': 'a str key spelled like a number'}",
    "[2**63, 2**70, -(2**64)]",  # past 64 bits: doubles, as before
    "[2**63 - 1, -(2**63)]",  # 19 digits: they may be past 64 bits, so the host decides
    "[float('nan'), float('inf')]",  # null, as JSON.stringify writes them
    "{'a': {1, 2}}",
    "b'x'",
    "catalog",
    "import json\njson",
    "x = []\nx.append(x)\nx",
    _nested(MAX_NESTING),
    _nested(MAX_NESTING + 5, "{}", "{'a': ", "}"),
]


#: A literal, an f-string, a comparison, a ``not``: a str, number, bool or None, which Monty hands over as
#: cheaply as its text; the cell runs as written (no appended lines to compile).
SCALARS = ["1", "'a string alone'", "f'{1 + 1}!'", "x = [1]\nlen(x) > 0", "not []", "None"]


@pytest.mark.parametrize("code", SCALARS)
def test_a_cell_that_ends_in_a_scalar_by_its_syntax_runs_as_written(pool, code, monkeypatch):
    assert rewritten(code) is None
    outcome, taken = _both_ways(pool, code, monkeypatch)
    assert outcome[0] == "value" and not taken


@pytest.mark.parametrize("code", TAKEN, ids=lambda c: c[:40])
def test_plain_data_crosses_as_the_childs_text_with_the_same_value(pool, code, monkeypatch):
    outcome, taken = _both_ways(pool, code, monkeypatch)
    assert outcome[0] == "value" and taken


@pytest.mark.parametrize("code", CONVERTED, ids=lambda c: c[:40])
def test_what_the_host_writes_otherwise_is_converted_as_before(pool, code, monkeypatch):
    _, taken = _both_ways(pool, code, monkeypatch)
    assert not taken


def _source(value: Any) -> str:
    """Python source that makes ``value`` (floats by their repr, which a non-finite one has not)."""
    if isinstance(value, float):
        return f"float('{value!r}')"
    if isinstance(value, list):
        return "[" + ", ".join(map(_source, value)) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(_source(v) + ", " for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_source(k)}: {_source(v)}" for k, v in value.items()) + "}"
    return repr(value)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(kids, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3) | st.booleans(), kids, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VALUES)
def test_any_value_comes_out_alike_both_ways(pool, monkeypatch, value):
    _both_ways(pool, _source(value), monkeypatch)


FAILING = [
    "1/0",
    "x = 1; 1/0",
    "x = 1\n\n(\n  1 /\n  0)",
    "é = 'ü'; (lambda: 1/0)()",
    "x = 1\r\n[1][x]  # index",
    "x = 1\r[1][x]",  # a line for CPython, not for Monty: run as written
    "s = '\u2028\x0c\x1c'\n[1][1]",
    "def f():\n    return {}['k']\nf()",
    "0 + undefined_name",
    "yield 1",  # CPython parses it, Monty refuses it: its refusal names the cell as written
    "x = 1\ndel x\nx",
]


@pytest.mark.parametrize("code", FAILING, ids=lambda c: c[:40])
def test_a_failure_points_at_the_cells_own_lines_and_columns(pool, code, monkeypatch):
    """The prefix in front of the last statement never shows: positions and source lines are the cell's."""
    outcome, _ = _both_ways(pool, code, monkeypatch)
    assert outcome[0] == "failed" and PREFIX not in outcome[1] and VALUE_NAME not in outcome[1]


def test_the_last_expression_gets_the_prefix_and_nothing_else_moves():
    code = "x = 1\n# note\ny = 2; (\n  x +\n  y)  # end"
    source, rewrite = rewritten(code)  # type: ignore[misc]
    assert rewrite == Rewrite(line=3, column=8)
    assert source.splitlines()[:5] == ["x = 1", "# note", f"y = 2; {PREFIX}(", "  x +", "  y)  # end"]
    tree = ast.parse(source)
    assigned = tree.body[2]
    assert isinstance(assigned, ast.Assign) and ast.unparse(assigned.value) == "x + y"
    assert isinstance(tree.body[-1], ast.Expr)  # the text is the cell's value


def test_columns_count_characters_and_lines_end_as_python_ends_them():
    source, rewrite = rewritten("é = 'ü'; é\r\nx = 1\nx")  # type: ignore[misc]
    assert rewrite == Rewrite(line=3, column=1) and source.startswith(f"é = 'ü'; é\r\nx = 1\n{PREFIX}x")
    assert rewritten("x = 1\rx") is None  # a lone carriage return ends a line for CPython, not for Monty
    assert rewritten("ü = 1; ü")[1] == Rewrite(line=1, column=8)  # type: ignore[index]
    # Only "\r\n", "\r" and "\n" end lines: a form feed or U+2028 in a string does not move the line.
    assert rewritten("s = '\u2028\x0c'\ns")[1] == Rewrite(line=2, column=1)  # type: ignore[index]


@pytest.mark.parametrize(
    "code",
    ["x = 1", "def f():\n    return 1", "for i in []:\n    i", "1 +", "x = '\x00'\nx", "[" * 300 + "]" * 300, "# c"],
    ids=["assignment", "def", "loop", "syntax error", "null byte", "too deep for CPython", "comment"],
)
def test_a_cell_whose_end_is_no_expression_or_does_not_parse_runs_as_written(code):
    assert rewritten(code) is None


def test_a_long_last_statement_runs_as_written_and_a_long_cell_does_not(pool, monkeypatch):
    """Only the last statement is parsed here, and at most MAX_STATEMENT_CHARS of it."""
    code = "[1,\n" + " 2," * MAX_STATEMENT_CHARS + "]"
    assert rewritten(code) is None
    assert _both_ways(pool, code, monkeypatch)[1] is False
    code = "x = 1\n" * 20_000 + "[x, 2]"
    assert rewritten(code) is not None
    assert _both_ways(pool, code, monkeypatch) == (("value", "[1,2]"), True)


def test_frames_on_other_lines_and_left_of_the_prefix_stay_as_they_are():
    rewrite = Rewrite(line=2, column=8)
    frames = [
        _frame(1, 20, "x = 1; 1/0"),
        _frame(2, 3, f"y = 1; {PREFIX}1/0"),
        _frame(2, 8 + len(PREFIX), f"y = 1; {PREFIX}1/0"),
        _frame(2, 12 + len(PREFIX), f"y = 1; {PREFIX}(lambda: 1/0)()"),
    ]
    shown = [(f.line, f.column, f.source_line) for f in rewrite.frames(frames)]
    assert shown == [
        (1, 20, "x = 1; 1/0"),
        (2, 3, "y = 1; 1/0"),
        (2, 8, "y = 1; 1/0"),
        (2, 12, "y = 1; (lambda: 1/0)()"),
    ]


def _frame(line: int, column: int, source: str) -> Any:
    return type("F", (), {"line": line, "column": column, "function_name": None, "source_line": source})()


def test_a_parked_cell_keeps_its_rewrite_when_it_resumes_elsewhere(pool):
    """The dump names where the prefix went: a fresh engine that resumes it takes the child's text and shows
    the cell's own columns."""
    first = PythonEngine(pool)
    first.configure(CONFIG, 32 << 20)
    first.compile("x = await yield_control('p')\ny = 2; 10 // x if x < 5 else {x} if x == 8 else [x] * 3", 5.0)
    waiting = first.start(time.monotonic() + 5.0)
    assert isinstance(waiting, Waiting)
    data = first.dump()
    first.close()
    for reply in ("7", "0", "8"):
        second = PythonEngine(pool)
        second.configure(CONFIG, 32 << 20)
        second.restore(data)
        end = second.resume([(waiting.requests[0]["id"], True, reply)], time.monotonic() + 5.0)
        if reply == "0":
            assert isinstance(end, Failed) and "line 2, column 8" in end.text and PREFIX not in end.text
        elif reply == "7":
            assert isinstance(end, Returned) and second.final_value(1 << 20, time.monotonic() + 5.0) == "[7,7,7]"
        else:  # a set: json.dumps refuses it, so the value is read from the resumed session and refused
            assert isinstance(end, Returned)
            with pytest.raises(GuestRuntimeError, match="type set cannot cross as JSON"):
                second.final_value(1 << 20, time.monotonic() + 5.0)
        second.close()


def test_a_dump_with_its_source_position_out_of_shape_is_refused():
    for state in ([0, 1], [1], "1:1", [1, True]):
        with pytest.raises(ValueError, match="out of shape"):
            Rewrite.restored(state)
    assert Rewrite.restored(None) is None and Rewrite.restored([2, 3]) == Rewrite(2, 3)


def test_without_the_source_scan_a_cell_runs_as_written_with_the_same_answer(pool, monkeypatch):
    """An install without a C compiler has no scan: every cell runs as written, its value copied as objects."""
    monkeypatch.setattr(cell_source, "_source_scan", None)
    assert rewritten("[1, 2]") is None
    assert _both_ways(pool, "[1, 2]", monkeypatch) == (("value", "[1,2]"), False)
