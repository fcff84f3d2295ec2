"""The engine contract (``guest_runtime/engine.py``): both real engines, QuickJS and Monty, hold to it, and
the driver (``worker.CellRun``) sees exactly the slice outcome the engine answered.

Each case is one cell written in both languages; the engines run in this process, unconfined.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import pytest

from bridge import jsoncodec
from bridge.messages import Language, RunFrame, WorkerFrame, run_frame, settle_frame
from guest_runtime import engine as contract
from guest_runtime.engine import Engine, Failed, Returned, Slice, Waiting
from guest_runtime.errors import GuestTimeout
from guest_runtime.monty.engine import PythonEngine
from guest_runtime.quickjs.engine import GuestEngine
from guest_runtime.worker import CellRun, SliceEnd

MiB = 1024 * 1024
CONFIG = jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB})
ENGINES: dict[Language, type[GuestEngine | PythonEngine]] = {"javascript": GuestEngine, "python": PythonEngine}

#: A cell that emits a line, waits on one host request, and returns what the reply makes of it.
YIELDS = {
    "javascript": "text('before'); const r = await yield_control('why'); text('after'); return [r, 2]",
    "python": "text('before')\nr = await yield_control('why')\ntext('after')\n[r, 2]",
}
#: A cell that throws an error of its own.
THROWS = {
    "javascript": "throw new RangeError('boom')",
    "python": "raise ValueError('boom')",
}
#: A cell whose host request is rejected and nobody catches it.
REJECTED = {
    "javascript": "await yield_control('x'); return 1",
    "python": "await yield_control('x')\n1",
}


def _engine(language: Language) -> Engine:
    engine: Engine = ENGINES[language]()
    engine.configure(CONFIG, 32 * MiB)
    return engine


def _started(language: Language, code: str) -> tuple[Engine, Slice]:
    engine = _engine(language)
    engine.compile(code, 5.0)
    return engine, engine.start(time.monotonic() + 5.0)


def _texts(output: list[str]) -> list[str]:
    return [jsoncodec.loads(entry)["text"] for entry in output]


def test_both_engines_have_every_operation_of_the_protocol_with_its_parameters():
    """Each engine class defines each operation of ``Engine`` under the protocol's parameter names, so a
    driver written against the protocol calls either with the same keywords."""
    members = [name for name, value in vars(Engine).items() if inspect.isfunction(value) and not name.startswith("_")]
    assert {"start", "resume", "request_args", "final_value", "heap_bytes", "close"} <= set(members)
    for cls in ENGINES.values():
        for name in members:
            expected = list(inspect.signature(getattr(Engine, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == expected, (cls.__name__, name)


@pytest.mark.parametrize("language", list(ENGINES))
def test_a_slice_that_waits_then_returns(language: Language):
    """The first slice waits on the cell's one request (its arguments read beside it, its output so far);
    the reply's slice returns, with the rest of the output, and the value is read after."""
    engine, first = _started(language, YIELDS[language])
    assert type(first) is Waiting
    assert [r["method"] for r in first.requests] == ["yield"] and first.outstanding == 1
    assert jsoncodec.loads(engine.request_args(0)) == ["why"]
    assert _texts(first.output) == ["before"]
    second = engine.resume([(first.requests[0]["id"], True, '"answer"')], time.monotonic() + 5.0)
    assert second == Returned(cancels=[], output=second.output) and _texts(second.output) == ["after"]
    assert jsoncodec.loads(engine.final_value(MiB, time.monotonic() + 5.0)) == ["answer", 2]
    engine.close()


@pytest.mark.parametrize(("language", "head"), [("javascript", "RangeError: boom"), ("python", "ValueError: boom")])
def test_a_cell_that_throws_fails_as_data_in_the_guest_phase(language: Language, head: str):
    """The cell's own error is a ``Failed`` outcome (not an exception), in cell terms: its first line is the
    error, and its frames name the cell's own file."""
    _, outcome = _started(language, THROWS[language])
    assert isinstance(outcome, Failed)
    assert (outcome.phase, outcome.code) == ("guest", "uncaught_error")
    assert outcome.text.split("\n")[0] == head
    assert "cell." in outcome.text  # cell.js:1:… / File "cell.py"


@pytest.mark.parametrize("language", list(ENGINES))
@pytest.mark.parametrize(("host_code", "code"), [("boom_code", "uncaught_error"), ("input_contract", "invalid_input")])
def test_a_host_rejection_nobody_catches_fails_in_the_bridge_phase(language: Language, host_code: str, code: str):
    """A rejected request that reaches the end of the cell is phase bridge; an input-contract rejection keeps
    its code, any other is the cell's uncaught error (one rule for both engines: ``bridge_failure_code``)."""
    engine, first = _started(language, REJECTED[language])
    assert isinstance(first, Waiting)
    error = jsoncodec.dumps_text({"message": "refused here", "code": host_code})
    outcome = engine.resume([(first.requests[0]["id"], False, error)], time.monotonic() + 5.0)
    assert isinstance(outcome, Failed)
    assert (outcome.phase, outcome.code) == ("bridge", code)
    assert "refused here" in outcome.text


RUNAWAY = {"javascript": "while (true) {}", "python": "while True:\n    pass"}


@pytest.mark.parametrize("language", list(ENGINES))
@pytest.mark.parametrize("budget_s", [0.2, 1.2])
def test_a_runaway_cell_is_stopped_at_its_deadline_as_a_timeout(language: Language, budget_s: float):
    """Past its deadline a busy cell raises GuestTimeout (the engine is thrown away), whatever the budget: Monty
    words its own limit in milliseconds under a second and in seconds above, and both are a timeout."""
    engine = _engine(language)
    engine.compile(RUNAWAY[language], 5.0)
    with pytest.raises(GuestTimeout):
        engine.start(time.monotonic() + budget_s)


def test_a_javascript_cell_that_awaits_nothing_the_host_serves_is_stalled():
    """No request pending and the cell not done: the engine says so as a failure of the cell."""
    _, outcome = _started("javascript", "await new Promise(() => {}); return 1")
    assert outcome == contract.stalled([], [])


class _Channel:
    """The worker's channel in memory: what the driver writes, frame by frame, with its raw frames."""

    def __init__(self, payloads: list[str]) -> None:
        self.payloads = payloads
        self.written: list[tuple[WorkerFrame, list[bytes]]] = []

    def read_raw(self) -> str:
        return self.payloads.pop(0)

    def write(self, message: WorkerFrame, attachments: Any = ()) -> None:
        self.written.append((message, list(attachments)))


def _cell_run(language: Language, code: str, channel: _Channel) -> CellRun:
    """The driver of one cell in a fresh engine of ``language``, writing to ``channel``."""
    msg: RunFrame = run_frame(
        cell_id="c",
        code=code,
        budget_ms=5000,
        memory_limit_bytes=32 * MiB,
        max_output_bytes=65536,
        value_capture_bytes=65536,
        config=jsoncodec.loads(CONFIG),
        language=language,
    )
    return CellRun(ENGINES[language](), channel, msg, CONFIG, float("inf"))  # type: ignore[arg-type]


@pytest.mark.parametrize("language", list(ENGINES))
def test_the_driver_sends_what_the_slice_came_to(language: Language):
    """``CellRun`` over a real engine: a ``Waiting`` slice is an idle frame with the request and its raw
    argument frame, and the runtime stays; the reply's ``Returned`` slice is a done frame with the value,
    and the runtime ends; the engine is reached through the protocol alone."""
    channel = _Channel(['"answer"'])
    run = _cell_run(language, YIELDS[language], channel)
    assert run.run() is SliceEnd.WAITING
    idle, raw = channel.written[-1]
    assert idle["t"] == "idle" and [r["method"] for r in idle["requests"]] == ["yield"] and idle["outstanding"] == 1
    assert jsoncodec.loads(raw[0]) == ["why"]
    assert run.resume(settle_frame("c", 5000, [{"id": idle["requests"][0]["id"], "ok": True}])) is SliceEnd.ENDED
    done, raw = channel.written[-1]
    assert done["t"] == "done" and done.get("error") is None and not done["recycle"]
    assert jsoncodec.loads(raw[-1]) == ["answer", 2]


@pytest.mark.parametrize("language", list(ENGINES))
def test_the_driver_sends_a_failed_slice_as_its_failure(language: Language):
    """A ``Failed`` slice is a done frame carrying the outcome's phase, code and text; the worker stays."""
    channel = _Channel([])
    run = _cell_run(language, THROWS[language], channel)
    assert run.run() is SliceEnd.ENDED
    done, raw = channel.written[-1]
    assert done["t"] == "done" and done["error"] == {"phase": "guest", "code": "uncaught_error"}
    assert raw[-1].decode().split("\n")[0].endswith("boom") and not done["recycle"]
