"""What a worker writes, as the host reads it: control frames counted before they are decoded, checked
for shape, then completed with their raw frames.

A worker may be owned by an attacker (a memory bug in QuickJS, Monty or a JSON decoder gives native
code in the process): its bytes are data, and what it can make the host do with them is bounded.

1. **Counted before decoded.**  A control frame is at most ``CONTROL_FRAME_BYTES`` and holds at most
   ``CONTROL_FRAME_VALUES`` JSON values, counted on its bytes (``json_values.count_values``, C-speed
   byte scans) before it is parsed: no frame makes the host build more than a few thousand objects.
2. **Shaped.**  A frame of a type the host reads (``ready``, ``idle``, ``done``, ``snapshot``) has every field the
   host reads, of its type, and shipments within what an honest worker sends.  A frame of any other
   type passes on, decoded and bounded, and its one reader refuses it (the pool wants ``ready``; a
   cell's leg kills the worker).
3. **Guest data stays encoded.**  Request arguments are kept as the bytes the guest wrote; output
   entries, the value and an error's text as UTF-8 text, checked as such; a value's raw frame is at
   most the size its frame claims.

A breach raises ``ProtocolError`` (``FrameDecodeError`` for bytes that are not JSON at all): the
host stops reading that worker and kills it, so only the cells in that process fail.
"""

from __future__ import annotations

from typing import Any, cast

from .errors import ProtocolError
from .framing import decode_body
from .json_values import count_values
from .messages import CONTROL_FRAME_BYTES, CONTROL_FRAME_VALUES, OutputShipment, WorkerFrame
from .output import MAX_OUTPUT_ENTRIES, received_output

_PHASES = ("input", "guest", "bridge", "host")


def control_frame(body: bytes) -> WorkerFrame:
    """Decode one control frame a worker wrote, refusing it before decoding when it is too large or
    holds too many values, and after decoding when a known frame type is out of shape."""
    if len(body) > CONTROL_FRAME_BYTES:
        raise ProtocolError(f"a control frame of {len(body)} bytes is over the {CONTROL_FRAME_BYTES}-byte cap")
    if count_values(body, CONTROL_FRAME_VALUES) > CONTROL_FRAME_VALUES:
        raise ProtocolError(f"a control frame holds more than {CONTROL_FRAME_VALUES} JSON values")
    frame = decode_body(body)
    if not isinstance(frame, dict) or not isinstance(frame.get("t"), str):
        raise ProtocolError("a frame is not an object with a type")
    check = _CHECKS.get(frame["t"])
    if check is not None:
        check(frame)
    return cast("WorkerFrame", frame)


def raw_frames_after(frame: WorkerFrame) -> int:
    """How many raw frames follow ``frame`` (its requests' arguments, its output, its value or error)."""
    if frame["t"] == "idle":
        return len(frame["requests"]) + _output_frames(frame["output"])
    if frame["t"] == "done":
        return _output_frames(frame["output"]) + 1
    if frame["t"] == "snapshot":
        return 1
    return 0


def completed(frame: WorkerFrame, raws: list[bytes]) -> WorkerFrame:
    """``frame`` with its raw frames in place: each request's ``args`` (bytes, as the guest wrote them),
    ``shipped`` (the output source items), and a done frame's ``text`` (its value's JSON or its error)."""
    if frame["t"] == "idle":
        requests = frame["requests"]
        for request, args in zip(requests, raws):
            request["args"] = args
        frame["shipped"] = _output(frame["output"], raws[len(requests) :])
    elif frame["t"] == "done":
        *output, last = raws
        frame["shipped"] = _output(frame["output"], output)
        frame["text"] = _text(last)
        if frame["ok"] and len(last) > frame["value"]:
            raise ProtocolError("a value's raw frame is longer than the size its done frame gives")
    elif frame["t"] == "snapshot":
        [state] = raws
        if len(state) != frame["size"]:
            raise ProtocolError("a snapshot's raw frame is not the size its frame gives")
        frame["state"] = state  # kept as bytes: never decoded by the host
    return frame


# ---- shapes ------------------------------------------------------------------------------------


def _count(value: object) -> bool:
    """A JSON integer that counts something (not a bool, which Python calls an int)."""
    return type(value) is int and value >= 0


def _number(value: object) -> bool:
    return type(value) in (int, float)


def _counts(value: object) -> bool:
    return isinstance(value, list) and all(_count(v) for v in value)


def _require(ok: bool, frame: dict[str, Any], what: str) -> None:
    if not ok:
        raise ProtocolError(f"a worker's {frame['t']} frame has {what}")


def _check_ready(frame: dict[str, Any]) -> None:
    sandbox = frame.get("sandbox")
    _require(_count(frame.get("pid")), frame, "no process id")
    _require(
        isinstance(sandbox, dict)
        and isinstance(sandbox.get("mode"), str)
        and isinstance(sandbox.get("layers"), list)
        and all(isinstance(layer, str) for layer in sandbox["layers"])
        and isinstance(sandbox.get("missing"), dict)
        and all(isinstance(why, str) for why in sandbox["missing"].values()),
        frame,
        "no sandbox report",
    )


def _check_stop(frame: dict[str, Any]) -> None:
    """What idle and done frames share: the runtime, cancels, the output, CPU and heap figures."""
    _require(isinstance(frame.get("rt"), str), frame, "no runtime name")
    _require(_counts(frame.get("cancels")), frame, "cancels that are not request ids")
    _require(_number(frame.get("cpu_ms")) and _count(frame.get("heap_bytes")), frame, "no CPU or heap figure")
    shipment = frame.get("output")
    if not isinstance(shipment, dict):
        raise ProtocolError(f"a worker's {frame['t']} frame has no output shipment")
    entries: object = shipment.get("entries")
    _require(
        isinstance(entries, int) and _count(entries) and entries <= MAX_OUTPUT_ENTRIES,
        frame,
        "an output entry count out of range",
    )
    _require("cut" not in shipment or _count(shipment["cut"]), frame, "a cut entry without its size")
    counted = shipment.get("counted")
    _require(
        counted is None or (_counts(counted) and len(counted) == 2 and counted[1] >= 1), frame, "a bad output count"
    )


def _check_idle(frame: dict[str, Any]) -> None:
    _check_stop(frame)
    requests = frame.get("requests")
    _require(
        isinstance(requests, list)
        and all(isinstance(r, dict) and _count(r.get("id")) and isinstance(r.get("method"), str) for r in requests),
        frame,
        "requests that are not {id, method} objects",
    )
    _require(_count(frame.get("outstanding")), frame, "no count of outstanding requests")


def _check_done(frame: dict[str, Any]) -> None:
    _check_stop(frame)
    _require(isinstance(frame.get("ok"), bool) and isinstance(frame.get("recycle"), bool), frame, "no ok or recycle")
    if frame["ok"]:
        _require(_count(frame.get("value")), frame, "no value size")
    else:
        error = frame.get("error")
        _require(
            isinstance(error, dict) and error.get("phase") in _PHASES and isinstance(error.get("code"), str),
            frame,
            "no failure phase and code",
        )


def _check_snapshot(frame: dict[str, Any]) -> None:
    _require(isinstance(frame.get("rt"), str), frame, "no runtime name")
    _require(_count(frame.get("size")), frame, "no size")
    _require("refused" not in frame or isinstance(frame["refused"], str), frame, "a refusal that is not text")


_CHECKS = {"ready": _check_ready, "idle": _check_idle, "done": _check_done, "snapshot": _check_snapshot}


# ---- raw frames --------------------------------------------------------------------------------


def _output_frames(shipment: OutputShipment) -> int:
    return shipment["entries"] + ("cut" in shipment)


def _output(shipment: OutputShipment, raws: list[bytes]) -> list[dict[str, Any]]:
    texts = [_text(raw) for raw in raws]
    if "cut" in shipment and len(raws[-1]) > shipment["cut"]:
        raise ProtocolError("a cut output entry's raw frame is longer than the entry")
    return received_output(shipment, texts)


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("a raw frame of guest text is not UTF-8") from None
