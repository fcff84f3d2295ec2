"""Guest errors and source pre-checks: `Name: message` first, frames on the user's own lines."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run

FRAME = re.compile(r"^    at (?:\S+ \()?cell\.js:(\d+):(\d+)\)?$")


def _failed(env: dict) -> dict:
    assert env["status"] == "failed", env
    return env


def test_reference_error_names_itself_then_maps_frames_to_cell_lines(client):
    """A ReferenceError reads `ReferenceError: missingFn is not defined`, then cell.js:L:C frames."""
    env = _failed(run(client, "function f() {\n  return missingFn();\n}\n\nf();"))
    lines = env["error"].split("\n")
    assert lines[0] == "ReferenceError: missingFn is not defined"
    frames = lines[1:]
    assert frames, env["error"]
    assert all(FRAME.match(f) for f in frames), frames
    assert [int(FRAME.match(f).group(1)) for f in frames] == [2, 5]
    assert frames[0].startswith("    at f (cell.js:2:")
    assert env["code"] == "uncaught_error" and env["failure_phase"] == "guest"
    assert env["bridge_dispatch_started"] is False


def test_error_after_await_reports_its_own_line(client):
    """An Error thrown after an await in a multi-line cell points at its own line."""
    env = _failed(run(client, 'const x = 1;\nawait null;\n\nthrow new TypeError("bad " + x);'))
    lines = env["error"].split("\n")
    assert lines[0] == "TypeError: bad 1"
    assert any(FRAME.match(f) and FRAME.match(f).group(1) == "4" for f in lines[1:]), env["error"]
    assert "<input>" not in env["error"] and "prelude" not in env["error"]


def test_thrown_non_error_is_reported(client):
    """Throwing a plain value fails the cell with that value in the message."""
    env = _failed(run(client, 'throw {reason: "nope"}'))
    assert "nope" in env["error"]
    assert env["failure_phase"] == "guest"


def test_syntax_error_is_rejected_as_input_with_cell_position(client):
    """A syntax error answers `SyntaxError at cell.js:L:C: …` with failure_phase input."""
    env = _failed(run(client, "const a = 1;\nlet = = 2;"))
    assert re.match(r"^SyntaxError at cell\.js:2:\d+: \S", env["error"]), env["error"]
    assert env["code"] == "invalid_input"
    assert env["failure_phase"] == "input"
    assert env["bridge_dispatch_started"] is False


def test_syntax_error_runs_nothing(client):
    """A cell with a syntax error late in the source emits no output (nothing ran)."""
    env = _failed(run(client, 'text("should not appear");\nconst = ;'))
    assert env["output"] == []
    assert env["error"].startswith("SyntaxError at cell.js:2:")


@pytest.mark.parametrize("code", ["ls -la", "pwd", "bash -c 'echo hi'", "cat notes.txt | grep todo", "$ git status"])
def test_shell_like_source_is_invalid_input(client, code):
    """Shell-like source is refused as invalid_input with a hint that cells run JavaScript."""
    env = _failed(run(client, code))
    assert env["code"] == "invalid_input" and env["failure_phase"] == "input"
    assert "JavaScript" in env["error"]
    assert env["telemetry"]["host_requests"] == 0


def test_javascript_with_shell_words_still_runs(client):
    """Real JavaScript that merely uses shell-ish names is not refused."""
    env = run(client, "const ls = [1, 2];\nconst pwd = 'x';\nreturn ls.length + pwd.length")
    assert env["status"] == "completed" and env["value"] == 3, env


@pytest.mark.parametrize(
    "code",
    [
        'const fs = require("fs"); return 1',
        'const m = await import("fs"); return 1',
        'import fs from "fs";\nreturn 1',
        "export const a = 1;",
        'const fs = requ\\u0069re("fs"); return 1',
    ],
)
def test_module_access_is_invalid_input(client, code):
    """require(...), import(...) and import/export are refused as module access before running."""
    env = _failed(run(client, code))
    assert env["code"] == "invalid_input" and env["failure_phase"] == "input"
    assert "module access is disabled" in env["error"]


def test_module_words_inside_strings_are_fine(client):
    """`require(` inside a string or comment is not module access."""
    env = run(client, '// require("fs")\nreturn "call require(x) or import(y)"')
    assert env["status"] == "completed" and env["value"] == "call require(x) or import(y)", env
