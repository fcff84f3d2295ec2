"""What a helper process can be asked to do: a fixed table of jobs, by name.

Runs in the helper.  Each job takes its arguments (from the job frame) and its payload (the raw
frames after it) and gives the fields of its answer and the answer's raw frames.  The service checks
every answer (``service.helpers.job``); these functions are the honest side of that contract.

The modules imported here are everything the helper will ever run: they are imported, and each job
run once (``warm_up``), before the helper confines itself, since a confined process can open no file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from bridge.errors import BridgeError
from bridge.json_values import count_values
from bridge.output import check_json_bytes
from service.tools.output_checks import output_problems
from service.tools.schema_checks import schema_problem_of
from service.tools.schema_guard import SchemaLimits

from .bodies import decode_outcome, rest_of, tool_value_slots
from .protocol import DETAIL_CHARS, PROBLEM_CHARS, JobName

#: A job: ``(args, payload) -> (answer fields, raw frames)``.
Job = Callable[[dict[str, object], list[bytes]], tuple[dict[str, object], list[bytes]]]


def decode(args: dict[str, object], payload: list[bytes]) -> tuple[dict[str, object], list[bytes]]:
    """A body's outcome; when it decoded, its rest and (wait bodies) each tool result value, compact JSON."""
    [body] = payload
    tool_values_raw = bool(args["tool_values_raw"])
    outcome, value = decode_outcome(body, tool_values_raw, cast("int | None", args["max_values"]))
    if outcome == "not_json":
        return {"outcome": outcome, "detail": value}, []
    if outcome != "ok":
        return {"outcome": outcome}, []
    values = [cast("bytes", entry["value"]) for entry in tool_value_slots(value)] if tool_values_raw else []
    return {"outcome": "ok"}, [rest_of(value), *values]


def count(args: dict[str, object], payload: list[bytes]) -> tuple[dict[str, object], list[bytes]]:
    [body] = payload
    return {"outcome": "count", "count": count_values(body, cast("int", args["cap"]))}, []


def schemas(args: dict[str, object], payload: list[bytes]) -> tuple[dict[str, object], list[bytes]]:
    """Each schema's problem (None: usable), cut to ``PROBLEM_CHARS``."""
    limits = SchemaLimits(**cast("dict[str, int]", args["limits"]))
    problems = [schema_problem_of(encoded, limits) for encoded in payload]
    return {"outcome": "problems", "problems": [_cut(p) for p in problems]}, []


def json_texts(args: dict[str, object], payload: list[bytes]) -> tuple[dict[str, object], list[bytes]]:
    """Whether each guest text (a value or an output entry a worker wrote) is one JSON value."""
    for index, text in enumerate(payload):
        try:
            check_json_bytes(text)
        except (BridgeError, UnicodeDecodeError) as exc:
            return {"outcome": "not_json", "index": index, "detail": str(exc)[:DETAIL_CHARS]}, []
    return {"outcome": "json"}, []


def output(args: dict[str, object], payload: list[bytes]) -> tuple[dict[str, object], list[bytes]]:
    """Whether a value fits its schema: ``ok``, ``mismatch`` with what does not, ``unusable`` with why not."""
    [schema, value] = payload
    verdict, lines = output_problems(schema, value, SchemaLimits(**cast("dict[str, int]", args["limits"])))
    if verdict == "ok":
        return {"outcome": verdict}, []
    own = {"details": list(lines)} if verdict == "mismatch" else {"problem": lines[0]}
    return {"outcome": verdict, **own}, []


JOBS: dict[JobName, Job] = {
    "decode": decode,
    "count": count,
    "schemas": schemas,
    "output": output,
    "json_texts": json_texts,
}


def warm_up() -> None:
    """Run every job once on small inputs, so whatever a first run loads lazily is loaded now."""
    wait = b'{"tool_results":[{"id":"r","ok":true,"value":{"a":[1,"\\u00e9"]}}]}'
    decode({"tool_values_raw": True, "max_values": 100}, [wait])
    decode({"tool_values_raw": False, "max_values": None}, [b'{"code":'])
    count({"cap": 1}, [b'["a,",[1],{"b":2}]'])
    schema = b'{"type":"object","properties":{"s":{"type":"string","pattern":"^a+$","format":"email"}},"$defs":{}}'
    schemas({"limits": {}}, [schema, b'{"type":"object","minimum":"zero"}'])
    json_texts({}, [b'[1,{"a":"\\u00e9"}]', b"123456789012345678901234", b"{"])
    output({"limits": {}}, [schema, b'{"s":"aa"}'])
    output({"limits": {}}, [schema, b'{"s":"b"}'])


def _cut(problem: str | None) -> str | None:
    if problem is None or len(problem) <= PROBLEM_CHARS:
        return problem
    return problem[: PROBLEM_CHARS - 1] + "…"
