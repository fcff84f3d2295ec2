"""Test-only stand-in for an attacker who owns a helper process (a memory bug in the JSON decoder, say).

A helper started with ``HelperPool.test_payload = plan`` (or ``start_helper(options, test_payload=plan)``)
loads this file before it confines itself and, once confined and ``ready``, calls ``run`` instead of
serving jobs honestly (see ``service.helpers.process._test_payload``; a production install has no
``tests/`` and refuses).  It acts only through what a confined helper still holds: its pipes.

``plan`` is JSON: ``{"answer": kind, ...}``.  For each job it reads, it writes the answer ``kind`` names
(``ANSWERS``); ``"report"`` first writes a frame with how the process was started (``LAUNCH``), then
serves honestly.  ``"marker"`` is the file the pickle's code would create, were it ever run.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

from bridge import jsoncodec
from bridge.framing import HEADER, encode_frame, encode_raw
from service.helpers.jobs import JOBS
from service.helpers.process import Channel, serve

#: How the process was started, read as this module loads (before confinement, which forbids getcwd).
LAUNCH = {
    "cwd": os.getcwd(),
    "environ": sorted(os.environ),
    "isolated": sys.flags.isolated,
    "path": list(sys.path),
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
}


class _RunsCode:
    """Unpickled, this would run ``code`` in whoever unpickles it (what the old helper's answers were)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return (exec, (self.code,))


def _answer(job: dict[str, Any], fields: dict[str, Any], frames: list[bytes] | None = None) -> bytes:
    frames = frames or []
    head = encode_frame({"t": "answer", "id": job["id"], **fields, "frames": len(frames)})
    return head + b"".join(encode_raw(f) for f in frames)


def _honest(job: dict[str, Any], payload: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
    return JOBS[job["name"]](job["args"], payload)


def _with_field(
    answer: tuple[dict[str, Any], list[bytes]], name: str, value: object
) -> tuple[dict[str, Any], list[bytes]]:
    fields, frames = answer
    return {**fields, name: value}, frames


def _pickled(plan: dict[str, Any]) -> bytes:
    """One length prefix and a pickle whose code would create the plan's marker file in its reader."""
    data = pickle.dumps(_RunsCode(f"open({plan['marker']!r}, 'w').write('owned')"))
    return HEADER.pack(len(data)) + data


def _decoded(job: dict[str, Any], rest: bytes) -> bytes:
    """An ``ok`` answer to a decode job whose decoded body is ``rest``."""
    return _answer(job, {"outcome": "ok"}, [rest])


#: kind -> (job, payload, plan) -> the bytes written in answer.
ANSWERS: dict[str, Callable[[dict[str, Any], list[bytes], dict[str, Any]], bytes]] = {
    # As an owned helper of the old process pool answered: what its reader unpickled ran there.
    "pickle": lambda job, payload, plan: _pickled(plan),
    "garbage": lambda job, payload, plan: encode_raw(b"\x00\xff not json at all"),
    "not_an_object": lambda job, payload, plan: encode_frame([job["id"], "ok"]),
    "frames_as_text": lambda job, payload, plan: encode_frame(
        {"t": "answer", "id": job["id"], "outcome": "ok", "frames": "1"}
    ),
    "other_job": lambda job, payload, plan: _answer({"id": job["id"] + 1}, *_honest(job, payload)),
    "unknown_outcome": lambda job, payload, plan: _answer(job, {"outcome": "pwned"}),
    "extra_field": lambda job, payload, plan: _answer(
        job, *_with_field(_honest(job, payload), "__class__", "os.system")
    ),
    "count_as_text": lambda job, payload, plan: _answer(job, {"outcome": "count", "count": "12"}),
    "control_flood": lambda job, payload, plan: _answer(job, {"outcome": "too_deep", "x": [0] * 500}),
    # A decoded body of many tiny values, within the bytes its answer may take but over the body's value cap.
    "value_flood": lambda job, payload, plan: _decoded(
        job, b'{"code":"return 1","x":[' + b"0," * plan["values"] + b"0]}"
    ),
    "too_deep": lambda job, payload, plan: _decoded(
        job, b'{"code":"return 1","x":' + b"[" * plan["depth"] + b"]" * plan["depth"] + b"}"
    ),
    "huge_frame": lambda job, payload, plan: HEADER.pack(2**31) + b"{",
    "extra_tool_value": lambda job, payload, plan: _answer(job, {"outcome": "ok"}, [*_honest(job, payload)[1], b"1"]),
    "exit": lambda job, payload, plan: sys.exit(0),
}


def run(channel: Channel, plan_text: str) -> int:
    plan = json.loads(plan_text)
    kind = plan["answer"]
    if kind == "report":
        channel.write({"t": "report", **LAUNCH})
        return serve(channel)
    while (message := channel.read_job()) is not None:
        job, payload = message
        if kind == "silent":
            continue  # reads every job, answers none
        if kind == "endless":
            _endless(channel, job, plan.get("frames", 100_001))
        data = ANSWERS[kind](dict(job), payload, plan)
        view = memoryview(data)
        while view:
            view = view[os.write(channel.fd_out, view) :]
    return 0


def _endless(channel: Channel, job: dict[str, Any], frames: int) -> None:
    """Announce ``frames`` raw frames (as many as an exec body's answer may hold), then write 64 KiB frames
    without end."""
    channel.write({"t": "answer", "id": job["id"], "outcome": "ok", "frames": frames})
    chunk = encode_raw(jsoncodec.dumps("x" * (64 * 1024 - 2)))
    while True:
        os.write(channel.fd_out, chunk)
