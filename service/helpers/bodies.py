"""A request body decoded: the rules every body is decoded by, inline or in a helper, and the helper's jobs.

The nesting cap keeps every value a caller sends encodable on its way on (guest frames,
envelopes, the store): the codec refuses anything nested deeper than ``jsoncodec.ENCODER_DEPTH``.
A wait body's tool result values (``tool_results[].value``) are detached as their compact JSON: the
service never turns them into Python objects, the guest gets them as they are.

``decode_outcome`` runs on the event loop for a small body (``service.http.request_json``) and in a
helper for a large one (``jobs.decode``).  ``DecodeJob`` and ``CountJob`` are the service's side of
those helper jobs: what an owned helper writes back is counted, decoded and checked again here, and
can never become code.
"""

from __future__ import annotations

from typing import Literal, cast

from bridge import jsoncodec
from bridge.json_values import count_values, nested_deeper_than, over_cap_message
from service.errors import BodyTooLarge, InvalidRequest
from service.runtime.dispatch import RawJson

from .job import Answer, AnswerCaps, HelperJob, is_int, is_str, refuse
from .protocol import DETAIL_CHARS

MiB = 1024 * 1024
MAX_BODY_DEPTH = 128
# What a wait body may hold besides its tool result values (ids, flags, error messages).
WAIT_REST_BYTES = MiB
#: Bytes a decoded body's answer (its rest and its tool values, compact JSON) may take per byte of the body,
#: besides ``ANSWER_SLACK``. Compact JSON is shorter than its source except for numbers: ``1e15,`` (5 bytes)
#: is ``1000000000000000.0,`` (19), and each tool value adds a frame header and a ``null`` in its place.
ANSWER_GROWTH = 5
ANSWER_SLACK = 64 * 1024

TOO_DEEP = (
    f"request body is nested more than {MAX_BODY_DEPTH} levels deep; send flatter data "
    "(for example, pass deep structures as a JSON string or save them with results.save)"
)
WAIT_REST_TOO_LARGE = (
    f"a wait body may hold at most {WAIT_REST_BYTES} bytes besides tool_results[].value "
    "(ids, ok flags, error messages); put data in value and keep errors short"
)

Outcome = Literal["ok", "too_many", "too_deep", "not_json", "wait_rest"]


def decode_outcome(body: bytes, tool_values_raw: bool, max_values: int | None = None) -> tuple[Outcome, object]:
    """``("ok", value)`` (with ``tool_values_raw``, each tool result value detached as its compact JSON
    bytes), ``("not_json", the decoder's words)``, or another outcome (``_refusal``) with None."""
    if max_values is not None and count_values(body, max_values) > max_values:
        return "too_many", None
    try:
        value = jsoncodec.loads(body)
    except jsoncodec.JSONDecodeError as exc:
        if "depth" in str(exc):
            return "too_deep", None
        return "not_json", str(exc)[:DETAIL_CHARS]
    if nested_deeper_than(value, MAX_BODY_DEPTH, body):
        return "too_deep", None
    if tool_values_raw and _detach_tool_values(value) > WAIT_REST_BYTES:
        return "wait_rest", None
    return "ok", value


def refusal(outcome: str, detail: object, max_values: int | None) -> InvalidRequest | BodyTooLarge:
    """The error a body that did not decode gets (the service words it, whoever decoded the body)."""
    if outcome == "too_many":
        return BodyTooLarge(over_cap_message(max_values or 0))
    if outcome == "not_json":
        return InvalidRequest(
            f"request body is not valid JSON ({detail}); send one UTF-8 JSON object as documented at /docs",
            need_param="body",
        )
    return InvalidRequest(WAIT_REST_TOO_LARGE if outcome == "wait_rest" else TOO_DEEP, need_param="body")


def tool_value_slots(body: object) -> list[dict[str, object]]:
    """The ``tool_results`` entries of a wait body that hold a ``value``, in order."""
    results = body.get("tool_results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        return []
    return [entry for entry in results if isinstance(entry, dict) and "value" in entry]


def _detach_tool_values(body: object) -> int:
    """Replace each ``tool_results[i].value`` by its compact JSON bytes; return the size of the rest."""
    for entry in tool_value_slots(body):
        entry["value"] = jsoncodec.dumps(entry["value"])
    return len(rest_of(body))


def rest_of(body: object) -> bytes:
    """The compact JSON of a decoded body, each detached tool value (bytes) written as null."""
    return jsoncodec.dumps(body, default=lambda _: None)


# ---- the service's side of the helper's jobs ----------------------------------------------------


class DecodeJob(HelperJob[object]):
    """Decode a large body in the helper: it answers its outcome, and for a body that decoded, the body's
    rest (compact JSON, each tool value written as null) and each detached tool value as raw frames.

    The rest is counted (the body's value cap), decoded and checked for depth here again; the tool
    values stay bytes (``RawJson``), as many as the rest has slots for. An owned helper can therefore
    rewrite the body it was given (only its principal's), never make the service run code, hold more
    than ``ANSWER_GROWTH`` times the body, or decode more values than the body's cap.
    """

    name = "decode"
    purpose = "decodes large request bodies"
    SHAPES = {"ok": {}, "too_many": {}, "too_deep": {}, "wait_rest": {}, "not_json": {"detail": is_str}}

    def __init__(self, body: bytes, tool_values_raw: bool, max_values: int | None) -> None:
        self.body = body
        self.tool_values_raw = tool_values_raw
        # The cap the rest is counted under: the body's, or (none given) what the body's size allows.
        self.max_values = max_values
        self.values_cap = max_values if max_values is not None else len(body) // 2 + 1

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        return {"tool_values_raw": self.tool_values_raw, "max_values": self.max_values}, [self.body]

    def caps(self) -> AnswerCaps:
        return AnswerCaps(
            control_bytes=DETAIL_CHARS * 6 + 1024,  # the decoder's words, each character escaped at worst
            control_values=8,
            frames=1 + self.values_cap,  # the rest, and at most one tool value per value of the body
            frame_bytes=ANSWER_GROWTH * len(self.body) + ANSWER_SLACK,
        )

    def finish(self, answer: Answer) -> object:
        frames = {**dict.fromkeys(self.SHAPES, range(1)), "ok": range(1, self.caps().frames + 1)}
        outcome = answer.outcome(self.SHAPES, frames)
        if outcome != "ok":
            raise refusal(outcome, answer.field("detail") if outcome == "not_json" else None, self.max_values)
        rest, *values = answer.frames
        if self.tool_values_raw and len(rest) > WAIT_REST_BYTES:
            refuse(f"sent a wait body's rest of {len(rest)} bytes, over the {WAIT_REST_BYTES} it may hold")
        if count_values(rest, self.values_cap) > self.values_cap:
            refuse(f"sent a decoded body of more than {self.values_cap} JSON values, over the body's cap")
        try:
            value = jsoncodec.loads(rest)
        except jsoncodec.JSONDecodeError:
            refuse("sent a decoded body that is not JSON")
        if nested_deeper_than(value, MAX_BODY_DEPTH, rest):
            refuse(f"sent a decoded body nested more than {MAX_BODY_DEPTH} levels deep")
        slots = tool_value_slots(value) if self.tool_values_raw else []
        if len(slots) != len(values) or any(entry["value"] is not None for entry in slots):
            refuse(f"sent {len(values)} tool result values for a body with {len(slots)} places for them")
        if not all(values):
            refuse("sent an empty tool result value")
        for entry, data in zip(slots, values, strict=True):
            entry["value"] = RawJson(data)
        return value


class CountJob(HelperJob[int]):
    """Count a large body's JSON values in the helper (``count_values``: over ``cap`` exactly when the body is)."""

    name = "count"
    purpose = "counts the values of large MCP request bodies"
    SHAPES = {"count": {"count": is_int}}

    def __init__(self, body: bytes, cap: int) -> None:
        self.body = body
        self.cap = cap

    def request(self) -> tuple[dict[str, object], list[bytes]]:
        return {"cap": self.cap}, [self.body]

    def caps(self) -> AnswerCaps:
        return AnswerCaps(control_bytes=1024, control_values=8, frames=0, frame_bytes=0)

    def finish(self, answer: Answer) -> int:
        answer.outcome(self.SHAPES, {"count": range(1)})
        count = cast("int", answer.field("count"))
        if count < 0:
            refuse(f"counted {count} values")
        return count
