"""What a person is asked about a parked call that needs approval, and what their answer means.

One form per pending approval: a message naming the tool, why it needs approval and the input it will run
with, and two fields, ``approve`` (boolean) and ``reason`` (text, shown to the cell when denied).

The cell wrote the input, and a before-hook may have built the reason from it, so both are shown as data:
JSON text (quoted, escaped: no line of theirs can pass for a line of the form), with the characters that
can hide or reorder text (controls, bidirectional and zero-width marks, line separators) written as
escapes, and cut to a share of the output budget, saying how much is not shown.  The framing sentences are
ours alone.

The person's answer is caller input: only the ids that were asked, only the two fields, each of its type
and within its bound.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bridge import jsoncodec
from bridge.json_types import JsonObject
from service.errors import InvalidRequest
from service.tools.approvals import MAX_REASON_CHARS

#: Forms in one round; the calls after these are asked in the next round.
MAX_FORMS = 16
#: Bytes of one call's input a form shows at most (less when many forms share the output budget).
PREVIEW_BYTES = 2048
#: The least a form shows of an input, however many forms share the budget.
MIN_PREVIEW_BYTES = 256

#: The fields of every approval form (a flat, primitive schema, as elicitation forms must be).
APPROVAL_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this call once, with exactly the input shown",
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "Optional; shown to the cell when you deny",
            "maxLength": MAX_REASON_CHARS,
        },
    },
    "required": ["approve"],
}

# Characters that can hide, reorder or break text on a person's screen: C1 controls and DEL, soft hyphen,
# bidirectional marks and overrides, zero-width characters, line and paragraph separators, invisible
# operators, variation selectors, the byte-order mark, interlinear annotations and tag characters.
_HIDDEN = re.compile(
    "[\x7f-\x9f\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff]"
)


@dataclass(frozen=True)
class ApprovalForm:
    call_id: str  # the pending call's id, which keys the form and its answer
    message: str


def approval_calls(envelope: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The pending calls of a (plain) waiting envelope that wait for an approval."""
    if envelope.get("status") != "waiting":
        return []
    calls = envelope.get("pending_tool_calls")
    if not isinstance(calls, list):
        return []
    return [
        c for c in calls if isinstance(c, Mapping) and c.get("method") == "approval" and isinstance(c.get("id"), str)
    ]


def forms_for(cell_id: str, calls: Sequence[Mapping[str, object]], budget_bytes: int) -> tuple[ApprovalForm, ...]:
    """The forms of one round: the first ``MAX_FORMS`` calls, their inputs sharing ``budget_bytes``."""
    asked = calls[:MAX_FORMS]
    preview = max(MIN_PREVIEW_BYTES, min(PREVIEW_BYTES, budget_bytes // max(1, len(asked))))
    later = len(calls) - len(asked)
    return tuple(_form(cell_id, call, preview, later) for call in asked)


def _form(cell_id: str, call: Mapping[str, object], preview: int, later: int) -> ApprovalForm:
    encoded = jsoncodec.dumps(call.get("input"))
    shown = encoded[:preview].decode("utf-8", "ignore")
    if len(shown.encode()) < len(encoded):
        what = f"Input (JSON, {len(encoded)} bytes, of which the first {len(shown.encode())} are shown):"
    else:
        what = f"Input (JSON, {len(encoded)} bytes):"
    lines = [
        f"A cell ({cell_id}) asks to make a tool call that needs your approval.",
        f"Tool: {_data(call.get('tool'))}",
        f"Why: {_data(call.get('reason', 'approval is required'))}",
        what,
        _escaped(shown),
        "Approve runs this call once, with exactly this input; deny rejects it in the cell.",
    ]
    if later:
        lines.append(f"{later} more call(s) of this cell wait for approval; they are asked next.")
    return ApprovalForm(str(call["id"]), "\n".join(lines))


def _data(value: object) -> str:
    """A value as quoted, escaped JSON text (a string stays on one line, whatever it holds)."""
    return _escaped(jsoncodec.dumps_text(value)[:MAX_REASON_CHARS])


def _escaped(text: str) -> str:
    return _HIDDEN.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def decisions(responses: Mapping[str, object], asked: Sequence[str]) -> list[dict[str, object]]:
    """The approval answers (``{id, approve, reason}``) a person's responses give, for a wait.

    ``responses`` maps a form's key (a pending call id) to the client's elicitation result, as plain JSON.
    ``accept`` with ``approve: true`` approves; ``accept`` with ``approve: false`` and ``decline`` deny, with
    the reason given; ``cancel`` (the person dismissed the form) decides nothing: the call stays pending.
    Raises InvalidRequest naming the response that is not an answer to a form that was asked.
    """
    unknown = [key for key in responses if key not in asked]
    if unknown:
        raise InvalidRequest(
            f"inputResponses answers {unknown[0][:64]!r}, which this round did not ask; answer only the forms of "
            "the input_required result",
            need_param="inputResponses",
        )
    found: list[dict[str, object]] = []
    for call_id in asked:
        if call_id in responses:
            decision = _decision(call_id, responses[call_id])
            if decision is not None:
                found.append(decision)
    return found


def _decision(call_id: str, response: object) -> dict[str, object] | None:
    where = f"inputResponses[{call_id!r}]"
    if not isinstance(response, Mapping) or response.get("action") not in ("accept", "decline", "cancel"):
        raise InvalidRequest(
            f"{where} is not an elicitation result (action accept, decline or cancel)", need_param=where
        )
    action = response["action"]
    if action == "cancel":
        return None
    content = response.get("content")
    content = {} if content is None else content
    if not isinstance(content, Mapping):
        raise InvalidRequest(f"{where}.content must be an object", need_param=where)
    extra = sorted(k for k in content if k not in ("approve", "reason"))
    if extra:
        raise InvalidRequest(
            f"{where}.content has {extra[0][:64]!r}; the form has approve and reason", need_param=where
        )
    reason = content.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
        raise InvalidRequest(
            f"{where}.content.reason must be text of at most {MAX_REASON_CHARS} characters", need_param=where
        )
    if action == "decline":
        return {"id": call_id, "approve": False, "reason": reason or "the person declined"}
    approve = content.get("approve")
    if not isinstance(approve, bool):
        raise InvalidRequest(f"{where}.content.approve must be true or false", need_param=where)
    return {"id": call_id, "approve": approve, "reason": reason or None}
