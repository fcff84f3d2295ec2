"""The framework-free part of the adapters: the code tool's description, arguments and answer."""

from __future__ import annotations

import pytest
from codemode_client import Envelope
from codemode_client.adapters import MAX_TOOL_LINE_CHARS, FrameworkTool, answer, description, exec_arguments, jsonable
from pydantic import BaseModel

SERVER = {"name": "codemode", "description": "Run JavaScript.", "input_schema": {"type": "object"}}


def test_each_framework_tool_adds_one_bounded_line():
    """The server's text comes first; each tool adds one line with its properties, cut at MAX_TOOL_LINE_CHARS."""
    tools = [
        FrameworkTool("get_weather", "Weather for a city.\nMore text.", {"properties": {"city": {"type": "string"}}}),
        FrameworkTool("huge", "x" * 5000, {"properties": {}}),
    ]
    text = description(SERVER, tools)
    lines = text.splitlines()
    assert lines[0] == "Run JavaScript."
    assert '- get_weather({"city":{"type":"string"}}): Weather for a city.' in lines
    huge = next(line for line in lines if line.startswith("- huge"))
    assert len(huge) == MAX_TOOL_LINE_CHARS and huge.endswith("...")
    assert description(SERVER, []) == "Run JavaScript."


@pytest.mark.parametrize(
    "args,message",
    [({}, "needs `code`"), ({"code": "  "}, "needs `code`"), ({"code": "return 1", "session_id": "s"}, "'session_id'")],
)
def test_bad_arguments_are_refused_naming_the_problem(args, message):
    """No code, blank code, or a field the model may not set: a ValueError naming it."""
    with pytest.raises(ValueError, match=message):
        exec_arguments(args)


def test_arguments_keep_the_set_fields():
    """None-valued optional fields are dropped; the rest go to exec."""
    assert exec_arguments({"code": "return 1", "title": None, "timeout_ms": 500}) == ("return 1", {"timeout_ms": 500})


class Quote(BaseModel):
    price: float


def test_tool_results_become_json():
    """JSON stays as it is, a pydantic model is dumped, anything else is its text."""
    assert jsonable({"a": [1, "x"]}) == {"a": [1, "x"]}
    assert jsonable(Quote(price=2.5)) == {"price": 2.5}
    assert jsonable({1, 2}) in ("{1, 2}", "{2, 1}")


def test_the_answer_holds_the_value_or_the_error_and_the_text_output():
    """Completed: value and texts; failed: error and code."""
    done = Envelope.parse(
        {"status": "completed", "cell_id": "c", "value": 3, "output": [{"type": "text", "text": "hi"}]}
    )
    assert answer(done) == {"status": "completed", "value": 3, "output": ["hi"]}
    failed = Envelope.parse({"status": "failed", "cell_id": "c", "error": "TypeError: x", "code": "uncaught_error"})
    assert answer(failed) == {"status": "failed", "error": "TypeError: x", "code": "uncaught_error"}
