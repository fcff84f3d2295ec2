"""One contract across languages: the same failure, written in JavaScript and in Python, ends alike.

Each row of ``FAILURES`` is one failure spelled in both languages and run through the real service (real
worker processes, QuickJS and Monty): the envelope's ``code`` and ``failure_phase`` must be the row's,
in both.  ``CAUGHT`` holds the host failures a cell can catch: what a JavaScript cell reads as ``e.code``
a Python cell reads as ``error_info(e)["code"]``, with the same other fields.

Failures that cannot be spelled alike are left out, with the reason:
- ``stalled`` (awaiting something nothing can settle): a Python cell has no bare future to await, so
  every await in it is host work or a task that ends.
- a value with no JSON form: JavaScript gives most values one (``JSON.stringify(new Set())`` is ``{}``),
  Python refuses a ``set`` as a ``TypeError`` (documented on the Python page).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import guest_runtime
from guest_runtime.monty.host_requests import FAILURE_FIELDS
from service.settings import ToolSettings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run, wait

#: A cell that waits on its caller, answered so that the call fails: (client, waiting envelope) -> envelope.
Answer = Callable[[TestClient, dict[str, Any]], dict[str, Any]]


def _deny(client: TestClient, env: dict[str, Any]) -> dict[str, Any]:
    (entry,) = env["pending_tool_calls"]
    assert entry["method"] == "approval", env
    return wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": False, "reason": "not today"}])


def _client_tool_fails(client: TestClient, env: dict[str, Any]) -> dict[str, Any]:
    (entry,) = env["pending_tool_calls"]
    assert entry["method"] == "tool", env
    return wait(client, env["cell_id"], tool_results=[{"id": entry["id"], "ok": False, "error": {"message": "broke"}}])


@dataclass(frozen=True)
class Failure:
    javascript: str
    python: str
    code: str
    phase: str
    fields: dict[str, Any] = field(default_factory=dict)  # more exec fields
    answer: Answer | None = None  # how the caller makes the waiting cell's call fail


#: The down MCP server: configured, but its command does not exist.
DOWN = McpServerConfig(name="down", command="/nonexistent/codemode-test-mcp-server", args=(), timeout_ms=2000)
APPROVAL = {"require_approval": ["echo"]}
CLIENT_TOOL = {"client_tools": [{"name": "mine", "input_schema": {"type": "object"}}]}
SESSION = {"session_id": "contract-table"}
MEMORY = {"memory_limit_bytes": 32 << 20}

FAILURES: dict[str, Failure] = {
    # -- host failures nobody caught: phase bridge
    "an uncaught tool error": Failure(
        'await fail({message: "no"})', 'await fail(message="no")', "uncaught_error", "bridge"
    ),
    "a tool error caught and raised again": Failure(
        'try { await fail({message: "no"}) } catch (e) { throw e }',
        'try:\n    await fail(message="no")\nexcept Exception as e:\n    raise e',
        "uncaught_error",
        "bridge",
    ),
    "arguments the tool's schema refuses": Failure(
        'await echo({x: 1, delay: "soon"})', 'await echo(x=1, delay="soon")', "invalid_input", "bridge"
    ),
    "a denied approval": Failure("await echo({x: 1})", "await echo(x=1)", "uncaught_error", "bridge", APPROVAL, _deny),
    "a client tool that failed": Failure(
        "await mine({a: 1})", "await mine(a=1)", "uncaught_error", "bridge", CLIENT_TOOL, _client_tool_fails
    ),
    "an MCP server that is down": Failure(
        "await MCP.down.anything({})", "await MCP.down.anything()", "uncaught_error", "bridge"
    ),
    "store without a session": Failure('await store("k", 1)', 'await store("k", 1)', "uncaught_error", "bridge"),
    "a declaration file that does not exist": Failure(
        'await API.read("tools/nope.d.ts")', 'await API.read("tools/nope.pyi")', "invalid_input", "bridge"
    ),
    "a saved result that does not exist": Failure(
        'await results.load("nope")', 'await results.load("nope")', "uncaught_error", "bridge", SESSION
    ),
    # -- the cell's own faults: phase guest
    "an error the cell raised": Failure(
        'throw new Error("boom")', 'raise ValueError("boom")', "uncaught_error", "guest"
    ),
    "a tool that does not exist": Failure("await nosuchtool({})", "await nosuchtool()", "uncaught_error", "guest"),
    "an MCP server that is not configured": Failure(
        "await MCP.nope.anything({})", "await MCP.nope.anything()", "uncaught_error", "guest"
    ),
    "a bad argument refused in the guest": Failure(
        "await catalog.search(5)", "await catalog.search(5)", "uncaught_error", "guest"
    ),
    "too many requests pending": Failure(
        "await Promise.all(Array.from({length: 500}, (_, i) => echo({x: i})))",
        "import asyncio\nawait asyncio.gather(*[echo(x=i) for i in range(500)])",
        "uncaught_error",
        "guest",
    ),
    "too many output entries": Failure(
        'for (let i = 0; i < 10001; i++) text("a")', 'for i in range(10001):\n    text("a")', "uncaught_error", "guest"
    ),
    "runaway recursion": Failure(
        "function f() { return f() }\nreturn f()", "def f():\n    return f()\n\nf()", "uncaught_error", "guest"
    ),
    "a runaway loop": Failure("while (true) {}", "while True:\n    pass", "timeout", "guest", {"timeout_ms": 300}),
    "a memory bomb": Failure(
        'const a = []; while (true) a.push("x".repeat(1000) + a.length)',
        'a = []\nwhile True:\n    a.append("x" * 1000 + str(len(a)))',
        "memory_limit_exceeded",
        "guest",
        MEMORY,
    ),
    # -- refused before anything ran: phase input
    "a syntax error": Failure("return (", "x = (", "invalid_input", "input"),
}

#: Host failures caught in the cell: (JavaScript, Python, the code caught, exec fields); each cell's value is
#: the error's fields.
CAUGHT: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "a tool error": ('await fail({message: "no"})', 'await fail(message="no")', "tool_error", {}),
    "arguments the tool's schema refuses": (
        'await echo({x: 1, delay: "soon"})',
        'await echo(x=1, delay="soon")',
        "invalid_input",
        {},
    ),
    "an MCP server that is down": (
        "await MCP.down.anything({})",
        "await MCP.down.anything()",
        "mcp_unavailable",
        {},
    ),
    "store without a session": ('await store("k", 1)', 'await store("k", 1)', "store_unavailable", {}),
    "a saved result that does not exist": (
        'await results.load("nope")',
        'await results.load("nope")',
        "result_unavailable",
        SESSION,
    ),
    "the same failing call a fourth time": (
        "for (let i = 0; i < 3; i++) { try { await fail({}) } catch {} } await fail({})",
        "for i in range(3):\n        try:\n            await fail()\n        except Exception:\n            pass\n    await fail()",
        "loop_guard",
        {},
    ),
}
#: The fields a caught host failure carries, in both languages.
FIELDS = ("message", "code", *FAILURE_FIELDS)
JS_CAUGHT = (
    "try {{ {call}; return null }} catch (e) {{ "
    f"return Object.fromEntries({list(FIELDS)}.filter((k) => e[k] !== undefined).map((k) => [k, e[k]])) }}}}"
)
PY_CAUGHT = "try:\n    {call}\n    r = None\nexcept Exception as e:\n    r = error_info(e)\nr"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The test tools (``echo`` waits for approval when a cell asks for it) and one MCP server that is down."""
    with make_client(tmp_path_factory.mktemp("contract"), tools=ToolSettings(), mcp_servers=(DOWN,)) as c:
        yield c


def _ended(client: TestClient, case: Failure, language: str) -> dict[str, Any]:
    env = run(client, case.javascript if language == "javascript" else case.python, language=language, **case.fields)
    if case.answer is not None:
        assert env["status"] == "waiting", env
        env = case.answer(client, env)
    return env


@pytest.mark.parametrize("name", list(FAILURES))
def test_the_same_failure_has_the_same_code_and_phase_in_both_languages(client: TestClient, name: str):
    """Each failure ends both cells failed, with the row's code and phase (never internal_error)."""
    case = FAILURES[name]
    ends = {lang: _ended(client, case, lang) for lang in ("javascript", "python")}
    for lang, env in ends.items():
        assert (env["status"], env["code"], env["failure_phase"]) == ("failed", case.code, case.phase), (lang, env)


@pytest.mark.parametrize("name", list(CAUGHT))
def test_a_caught_host_failure_exposes_the_same_fields_in_both_languages(client: TestClient, name: str):
    """What a JavaScript cell reads off the caught error (``e.code``, ``e.tool``, ...) a Python cell reads in
    ``error_info(e)``: the same fields, the same values."""
    javascript, python, code, fields = CAUGHT[name]
    js = run(client, JS_CAUGHT.format(call=javascript), **fields)
    py = run(client, PY_CAUGHT.format(call=python), language="python", **fields)
    assert js["status"] == py["status"] == "completed", (js, py)
    assert js["value"]["code"] == code, js["value"]
    assert py["value"] == js["value"]


def test_the_fields_are_the_ones_the_javascript_error_carries():
    """error_info's field list is the prelude's: a field added to the JavaScript error reaches Python too."""
    (requests_js,) = Path(guest_runtime.__file__).parent.rglob("prelude/requests.js")  # wherever the engine lives
    prelude = requests_js.read_text()
    listed = re.search(r"const extra = \[([^\]]*)\]", prelude)
    assert listed is not None
    assert tuple(re.findall(r'"(\w+)"', listed.group(1))) == FAILURE_FIELDS


def test_error_info_is_none_for_the_cells_own_exception(client: TestClient):
    """An exception the cell raised itself is not a host failure: ``error_info`` answers None."""
    env = run(client, PY_CAUGHT.format(call='raise RuntimeError("mine")'), language="python")
    assert env["status"] == "completed" and env["value"] is None, env
    env = run(client, "error_info('not an exception')", language="python")
    assert env["code"] == "uncaught_error" and env["error"].startswith("TypeError: error_info(e) takes"), env
