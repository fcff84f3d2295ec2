"""Python cells (``"language": "python"``) against the real service: Monty in the confined worker processes.

What both languages share is asserted once for both (``test_guest_output.py`` is parametrised by
language); this module holds what is spelled for Python: the value of the last expression, keyword
arguments, exceptions with the cell's own line numbers, syntax errors as input failures, the limits,
the OS refused, and a parked cell that resumes its own paused state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings import ToolSettings
from tests.conftest import make_client, wait
from tests.support.polling import poll_until
from tests.support.tools import CALLS


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The test tools; `echo` calls wait for approval when the cell asks for it (require_approval)."""
    with make_client(tmp_path_factory.mktemp("python"), tools=ToolSettings()) as c:
        yield c


def py(client: TestClient, code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, "language": "python", **fields})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def failed(env: dict[str, Any]) -> str:
    assert env["status"] == "failed", env
    return env["error"]  # type: ignore[no-any-return]


def test_the_last_expression_statement_is_the_value(client):
    """A module's last expression statement is the cell value; a module ending in a statement gives null."""
    assert py(client, "x = 40\nx + 2")["value"] == 42
    assert py(client, "x = 40")["value"] is None
    env = py(client, "(1, 'a', {'k': [True, None, 1.5]})")
    assert env["status"] == "completed" and env["value"] == [1, "a", {"k": [True, None, 1.5]}]


def test_tools_are_async_functions_taking_keyword_arguments(client):
    """`await echo(x=...)` calls the tool with its keyword arguments as the input; gather runs calls together."""
    before = CALLS.get("echo", 0)
    env = py(client, "import asyncio\na, b = await asyncio.gather(echo(x=1), echo(x=[2]))\n[a['echo'], b['echo']]")
    assert env["status"] == "completed", env
    assert env["value"] == [1, [2]]
    assert CALLS.get("echo", 0) == before + 2
    assert env["telemetry"]["call_count"] == 2


def test_positional_tool_arguments_are_a_clear_type_error(client):
    """A tool takes keyword arguments only: a positional one is a catchable TypeError saying how to call it."""
    error = failed(py(client, "await echo({'x': 1})"))
    assert error.startswith("TypeError: echo() takes the tool's input as keyword arguments"), error


def test_tool_failures_are_catchable_exceptions_with_their_code(client):
    """A failing tool raises in the guest; its message and stable code (in the text) can be caught."""
    env = py(
        client,
        "try:\n    await fail(message='nope')\n    r = None\nexcept Exception as e:\n    r = [type(e).__name__, str(e)]\nr",
    )
    assert env["status"] == "completed", env
    name, message = env["value"]
    assert name == "RuntimeError" and "nope" in message and "(code: " in message


def test_errors_lead_with_the_exception_and_the_cells_own_lines(client):
    """An uncaught exception fails the cell (phase guest) with `Name: message`, then its own file and lines."""
    env = py(client, "def f(n):\n    return 10 // n\n\nf(0)")
    error = failed(env)
    assert env["failure_phase"] == "guest" and env["code"] == "uncaught_error"
    lines = error.split("\n")
    assert lines[0] == "ZeroDivisionError: division by zero", error
    assert '  File "cell.py", line 4, column 1, in <module>' in lines
    assert '  File "cell.py", line 2, column 12, in f' in lines


def test_syntax_errors_are_input_failures_that_dispatch_nothing(client):
    """A syntax error (or a construct Monty does not run, such as a generator) is failure_phase input."""
    for code in ("def f(:\n    pass", "x = 1\ndef g():\n    yield 1"):
        env = py(client, code)
        error = failed(env)
        assert env["failure_phase"] == "input" and env["code"] == "invalid_input", env
        assert "at cell.py:" in error and "correct the Python source" in error
    assert failed(py(client, "def f(:\n    pass")).startswith("SyntaxError at cell.py:1:7: ")


def test_the_javascript_source_checks_do_not_judge_python(client):
    """`import` is how Python cells reach asyncio: the JavaScript module check does not refuse it."""
    assert py(client, "import asyncio\n1")["value"] == 1


def test_runaway_loops_time_out(client):
    """An endless loop ends at the cell's budget with failure_code timeout."""
    env = py(client, "while True:\n    pass", timeout_ms=300)
    assert failed(env) == "cell timeout exceeded" and env["code"] == "timeout"


def test_memory_bombs_hit_the_cells_memory_limit(client):
    """An allocation past memory_limit_bytes fails the cell with memory_limit_exceeded; the next cell runs."""
    env = py(client, "x = [0] * 10**9")
    assert failed(env) == "memory limit exceeded" and env["code"] == "memory_limit_exceeded"
    env = py(client, "s = 'x' * 10\nfor i in range(40):\n    s = s + s\nlen(s)")
    assert env["code"] == "memory_limit_exceeded", env
    assert py(client, "1 + 1")["value"] == 2


def test_deep_recursion_is_a_recursion_error(client):
    """Runaway recursion raises RecursionError inside the cell (catchable), never crashes the worker."""
    error = failed(py(client, "def f(n):\n    return f(n + 1)\nf(0)"))
    assert error.startswith("RecursionError: maximum recursion depth exceeded"), error
    assert len(error.split("\n")) <= 1 + 2 * 10  # at most ten frames, each with its source line
    env = py(client, "def f(n):\n    return f(n + 1)\ntry:\n    f(0)\nexcept RecursionError:\n    r = 'caught'\nr")
    assert env["value"] == "caught"


def test_huge_ints_and_strings_stay_bounded(client):
    """A huge int computes, but printing 10**100000 is refused as in CPython; a past-64-bit value is a double."""
    assert "Exceeds the limit" in failed(py(client, "len(str(10**100000))"))
    assert py(client, "2**70")["value"] == float(2**70)
    assert "cannot cross as JSON" not in failed(py(client, "10**400"))


@pytest.mark.parametrize(
    "code, expected",
    [
        ("open('/etc/passwd').read()", "PermissionError"),
        ("from pathlib import Path\nPath('/etc/hostname').read_text()", "PermissionError"),
        ("import os\nos.getenv('HOME')", "RuntimeError: 'os.getenv' is not supported"),
        ("import subprocess", "ModuleNotFoundError"),
        ("import socket", "ModuleNotFoundError"),
        ("__import__('os')", "NameError"),
    ],
)
def test_the_os_and_the_host_are_out_of_reach(client, code, expected):
    """Files, the environment, processes and sockets are refused inside Monty with an ordinary Python error."""
    assert failed(py(client, code)).startswith(expected)


def test_values_without_a_json_form_fail_the_call(client):
    """A set as the value, or as a tool argument, fails as JSON would: naming the type."""
    assert "a value of type set cannot cross as JSON" in failed(py(client, "{1, 2}"))
    error = failed(py(client, "await echo(x={1})"))
    assert error.startswith("TypeError: a value of type set cannot cross as JSON"), error


def test_print_text_and_json_share_one_ordered_stream(client):
    """print lines, text() and json() appear in call order; print's total is bounded with one marker."""
    env = py(client, "print('a', 1)\ntext('b')\njson({'c': [1]})\nprint('d')\n0")
    assert env["output"] == [
        {"type": "text", "text": "a 1"},
        {"type": "text", "text": "b"},
        {"type": "json", "value": {"c": [1]}},
        {"type": "text", "text": "d"},
    ]
    env = py(client, "for i in range(5000):\n    print('0123456789')\n1")
    assert env["output"][-1] == {"type": "text", "text": "[print output truncated]"}
    assert len(env["output"]) < 2000


def test_an_approval_parks_the_cell_and_resumes_its_own_state_without_replay(client):
    """require_approval parks the call; approved, the same paused cell continues (its earlier output is not
    repeated, the tool runs once, two legs) and denied, the guest catches the refusal's code."""
    before = CALLS.get("echo", 0)
    code = "text('before')\nstate = [1, 2, 3]\nr = await echo(x=41)\ntext('after')\n[r['echo'], state]"
    env = py(client, code, require_approval=["echo"])
    assert env["status"] == "waiting", env
    [entry] = env["pending_tool_calls"]
    assert entry["method"] == "approval" and entry["input"] == {"x": 41}
    assert env["output"] == [{"type": "text", "text": "before"}] and CALLS.get("echo", 0) == before
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": True}])
    assert done["status"] == "completed", done
    assert done["value"] == [41, [1, 2, 3]] and done["output"] == [{"type": "text", "text": "after"}]
    assert CALLS.get("echo", 0) == before + 1 and done["telemetry"]["legs"] == 2
    code = "try:\n    await echo(x=1)\n    r = 'ran'\nexcept Exception as e:\n    r = str(e)\nr"
    env = py(client, code, require_approval=["echo"])
    [entry] = env["pending_tool_calls"]
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": False, "reason": "no"}])
    assert "(code: approval_denied)" in done["value"], done


def test_store_and_load_in_a_session(client):
    """`await store(key, value)` and `await load(key)` keep a value per session; without one it is a clear error."""
    env = py(client, "await store('k', {'a': 1})\nawait load('k')", session_id="py-session")
    assert env["status"] == "completed" and env["value"] == {"a": 1}, env
    assert py(client, "await load('k')", session_id="py-session")["value"] == {"a": 1}
    assert "send session_id" in failed(py(client, "await load('k')"))


def test_sleep_and_yield_control_wait_on_the_host(client):
    """`await sleep(seconds)` waits on a host timer; a bad argument is a TypeError."""
    assert py(client, "await sleep(0.01)\n'slept'")["value"] == "slept"
    assert failed(py(client, "await sleep('1')")).startswith("TypeError: sleep(seconds) needs a number")


def test_unknown_names_are_name_errors(client):
    """A name that is neither the cell's, a built-in nor a guest function is a NameError, as in Python."""
    assert failed(py(client, "await nothing_here(x=1)")).startswith("NameError: name 'nothing_here' is not defined")


def test_catalog_handles_are_dataclass_values_with_call_and_describe(client):
    """`catalog.all()` lists handles; `catalog.search` finds them; `h.call(**input)` and `h.describe()` ask the
    host; a handle crosses as JSON as its metadata."""
    env = py(client, "[h.callableName for h in catalog.all()]")
    assert env["value"] == ["blob", "echo", "fail", "news"]
    env = py(
        client, "[h] = await catalog.search('echo', limit=1)\n[await h.call(x=3), h, (await h.describe())['name']]"
    )
    assert env["status"] == "completed", env
    reply, meta, name = env["value"]
    assert reply["echo"] == 3 and meta["callableName"] == "echo" and "mcp" not in meta and name == "echo"
    assert env["telemetry"]["search_count"] == 1 and env["telemetry"]["describe_count"] == 1


def test_results_and_api_namespaces(client):
    """`results.save/load/delete` keep a value out of the context; `API.list()` and `API.read(path)` read the
    declaration files."""
    env = py(client, "ref = await results.save({'a': [1, 2]})\n[ref['count'], await results.load(ref['id'])]")
    assert env["value"] == [1, {"a": [1, 2]}], env
    code = "files = (await API.list('tools'))['files']\n[f['path'] for f in files], (await API.read('tools/echo.d.ts'))"
    env = py(client, code)
    paths, read = env["value"]
    assert "tools/echo.d.ts" in paths and "declare function echo" in read["content"], env


WEATHER = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_client_tools_wait_for_the_caller_and_resume_the_paused_cell(client):
    """A client tool call parks the cell with a pending entry; the posted result resumes the same cell."""
    code = "n = 7\nw = await get_weather(city='Oslo')\n[w['temp'], n]"
    env = py(client, code, client_tools=[WEATHER])
    assert env["status"] == "waiting", env
    [entry] = env["pending_tool_calls"]
    assert entry["method"] == "tool" and entry["input"] == {"city": "Oslo"}
    done = wait(client, env["cell_id"], tool_results=[{"id": entry["id"], "ok": True, "value": {"temp": 21}}])
    assert done["status"] == "completed" and done["value"] == [21, 7], done


def test_background_python_cells_end_on_their_own(client):
    """`background: true` answers running at once; the cell's end is read back from its status."""
    env = py(client, "await sleep(0.05)\ntext('late')\n'done'", background=True)
    assert env["status"] == "running", env
    poll_until(lambda: client.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "completed", "the cell's end")


# ---- the Python Monty runs (docs/guide/python-cells.md, "The Python that runs") -------------------


@pytest.mark.parametrize(
    "construct, code",
    [
        ("yield expressions", "def g():\n    yield 1"),
        ("async comprehensions", "async def f():\n    return [i async for i in g()]"),
        ("exception groups", "try:\n    pass\nexcept* ValueError:\n    pass"),
    ],
)
def test_constructs_monty_does_not_run_are_input_failures(client, construct, code):
    """A generator, an async comprehension or ``except*`` is refused before the cell runs, naming the construct."""
    env = py(client, code)
    assert (env["status"], env["failure_phase"], env["code"]) == ("failed", "input", "invalid_input"), env
    assert construct in env["error"] and "No tools were dispatched" in env["error"]


def test_classes_dataclasses_match_and_lambdas_run(client):
    """Monty 1.x runs class definitions (methods, class attributes), dataclasses, ``match`` and lambdas."""
    code = (
        "from dataclasses import dataclass\n"
        "class Counter:\n    start = 10\n    def __init__(self, n):\n        self.n = n\n"
        "    def total(self):\n        return self.start + self.n\n"
        "@dataclass\nclass Point:\n    x: int\n    y: int\n"
        "def kind(v):\n    match v:\n        case [a, b]:\n            return a + b\n        case {'k': k}:\n"
        "            return k\n        case _:\n            return None\n"
        "[Counter(5).total(), Point(1, 2).y, kind([1, 2]), kind({'k': 'v'}), kind(3), (lambda x: x * 2)(4)]"
    )
    assert py(client, code)["value"] == [15, 2, 3, "v", None, 8]


def test_the_documented_modules_import_and_the_others_do_not(client):
    """The modules the Python page lists import; others are ModuleNotFoundError; sleeps are refused."""
    code = (
        "import asyncio, json, re, math, datetime, typing, sys, pathlib\n"
        "async def two(x):\n    return x * 2\n"
        "[await asyncio.gather(two(1), two(2)), json.loads(json.dumps([1])), re.findall(r'\\d', 'a1b2'),"
        " math.sqrt(16), sys.version]"
    )
    assert py(client, code)["value"] == [[2, 4], [1], ["1", "2"], 4.0, "3.14.0 (Monty)"]
    listed = "time, random, itertools, functools, collections, dataclasses, os, decimal, copy, bisect, base64, hashlib"
    assert py(client, f"import {listed}, csv, tomllib, binascii\n1")["value"] == 1
    for module in ("string", "enum", "heapq", "operator", "uuid", "io", "struct", "socket", "subprocess"):
        assert failed(py(client, f"import {module}")).startswith("ModuleNotFoundError"), module
    assert "'time.sleep' is not supported" in failed(py(client, "import time\ntime.sleep(1)"))


def test_import_json_shadows_the_json_output_function(client):
    """`import json` binds the module over the cell's `json()` output function, as any Python name would
    (under another name both are there); dunder attributes are not reachable."""
    assert failed(py(client, "import json\njson({'a': 1})")).startswith("TypeError")
    assert py(client, "json({'a': 1})\n1")["output"] == [{"type": "json", "value": {"a": 1}}]
    both = py(client, "import json as js\njson({'a': js.dumps([1])})\n1")
    assert both["output"] == [{"type": "json", "value": {"a": "[1]"}}]
    assert failed(py(client, "(1).__class__")).startswith("AttributeError")


def test_a_value_monty_cannot_hand_over_fails_only_its_cell_and_the_worker_lives_on(client):
    """``type(catalog)`` as a cell's value, or in a call's arguments, made Monty's conversion raise out of
    the engine and the worker exit, losing the cell and every parked cell of that process.  Now the cell
    fails with a TypeError that says what to return, a JavaScript cell parked in the same process
    resumes, and the process serves the next cell."""
    parked = client.post(
        "/v1/exec", json={"code": "await yield_control('park'); return 'resumed'", "timeout_ms": 10000}
    ).json()
    assert parked["status"] == "waiting", parked
    for code in ("type(catalog)", "text(type(type))"):
        env = client.post("/v1/exec", json={"code": code, "language": "python"}).json()
        assert env["status"] == "failed" and env["error"].startswith("TypeError"), env
        assert "JSON form" in env["error"] or "cannot cross as JSON" in env["error"], env
        assert env["code"] != "runtime_unavailable", env
    resumed = client.post(f"/v1/cells/{parked['cell_id']}/wait", json={}).json()
    assert resumed["status"] == "completed" and resumed["value"] == "resumed", resumed
    assert client.post("/v1/exec", json={"code": "1 + 1", "language": "python"}).json()["value"] == 2


def test_a_tool_named_error_info_takes_the_name(client):
    """`error_info` is a built-in only where no tool has the callable name: a client tool called so is called."""
    env = py(client, "await error_info(a=1)", client_tools=[{"name": "error_info", "input_schema": {"type": "object"}}])
    assert env["status"] == "waiting", env
    (entry,) = env["pending_tool_calls"]
    assert (entry["method"], entry["name"], entry["input"]) == ("tool", "error_info", {"a": 1}), entry
    done = wait(client, env["cell_id"], tool_results=[{"id": entry["id"], "ok": True, "value": "mine"}])
    assert done["value"] == "mine", done
