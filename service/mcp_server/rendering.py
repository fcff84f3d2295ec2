"""The model-facing text of a cell envelope (MCP ``content``); the envelope itself is ``structuredContent``.

A model reads this text, a program reads the envelope (two channels: text for the model, structure for programs).  The text holds what
the cell printed, then a compact rendering of its value, its pending calls or its error, and says in
words what a truncation marker means, so a model never has to decode marker JSON.  Its size follows
the envelope's, which the cell's ``max_output_bytes`` already bounds: every part is either a string
the envelope carries or the compact JSON of a value it carries, plus fixed framing per part.

Once a cell has seen network-derived data (``untrusted_content``), text entries arrive wrapped by the
cell already; everything else rendered from data (JSON entries, the value, the error, warnings) is
wrapped here the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from bridge import jsoncodec
from service.tools.untrusted import wrap_untrusted

UNTRUSTED_SOURCE = "network"

#: Wraps text rendered from a cell's data as untrusted when the cell saw network content.
_Wrap = Callable[[str], str]
#: Who decides the approvals a waiting cell shows: the model (its key allows it), a person elsewhere (the
#: HTTP API), or a person who dismissed the client's approval forms without deciding.
Approver = Literal["model", "elsewhere", "dismissed"]


def envelope_text(envelope: Mapping[str, object], approver: Approver = "model") -> str:
    """What a model should read of ``envelope``: output, then the outcome, then warnings."""
    untrusted = envelope.get("untrusted_content") is True

    def data(text: str) -> str:
        return wrap_untrusted(text, UNTRUSTED_SOURCE) if untrusted else text

    parts = [_output_entry(entry, data) for entry in _items(envelope.get("output"))]
    parts.append(_outcome(envelope, data, approver))
    parts += [data(f"Warning: {w}") for w in _items(envelope.get("warnings"))]
    return "\n".join(part for part in parts if part)


def _output_entry(entry: object, data: _Wrap) -> str:
    if not isinstance(entry, Mapping):
        return ""
    if entry.get("truncated") is True:
        return data(marker_text("output", entry))
    if entry.get("type") == "text":
        return str(entry.get("text", ""))  # wrapped by the cell when untrusted
    return data(_compact(entry.get("value")))


def _outcome(envelope: Mapping[str, object], data: _Wrap, approver: Approver) -> str:
    status = envelope.get("status")
    cell_id = envelope.get("cell_id")
    if status == "completed":
        value = envelope.get("value")
        if value is None:
            return ""
        if isinstance(value, Mapping) and value.get("truncated") is True:
            return data(reference_text(value) if "reference" in value else marker_text("result", value))
        return data(f"Result: {_compact(value)}")
    if status == "failed":
        return data(f"Error ({envelope.get('code')}, {envelope.get('failure_phase')} phase): {envelope.get('error')}")
    if status == "waiting":
        return _waiting_text(envelope, approver)
    return (
        f"Cell {cell_id} is still running. Call `wait` with cell_id {cell_id!r} for its output and "
        "result, or `cancel` to stop it."
    )


def _waiting_text(envelope: Mapping[str, object], approver: Approver) -> str:
    cell_id = envelope.get("cell_id")
    calls = [c for c in _items(envelope.get("pending_tool_calls")) if isinstance(c, Mapping)]
    lines = [f"Cell {cell_id} is waiting ({envelope.get('reason')}): it is parked, not finished."]
    # One pass, each call in one group (not `in` tests: those compare whole calls, inputs included).
    approvals: list[Mapping[str, object]] = []
    answers: list[Mapping[str, object]] = []
    running: list[Mapping[str, object]] = []
    for c in calls:
        group = approvals if c.get("method") == "approval" else answers if "input" in c else running
        group.append(c)
    for call in approvals:
        why = f" ({call['reason']})" if call.get("reason") else ""
        lines.append(
            f"- approval {call.get('id')} for tool {call.get('tool')}{why}, input: {_compact(call.get('input'))}"
        )
    for call in answers:
        lines.append(
            f"- tool {call.get('name') or call.get('tool')} ({call.get('id')}) needs your result, input: {_compact(call.get('input'))}"
        )
    if running:
        names = ", ".join(str(c.get("tool") or c.get("method")) for c in running)
        lines.append(f"Still running on the host: {names}.")
    if approvals:
        lines.append(_APPROVERS[approver].format(cell=cell_id))
    if answers:
        lines.append(f"Answer with `wait` {{cell_id: {cell_id!r}, tool_results: [{{id, ok, value|error}}]}}.")
    if not approvals and not answers:
        lines.append(f"Call `wait` with cell_id {cell_id!r} to let it continue (or `cancel` to stop it).")
    return "\n".join(lines)


_APPROVERS: dict[Approver, str] = {
    "model": "Decide with `wait` {{cell_id: {cell!r}, approvals: [{{id, approve: true|false, reason?}}]}}.",
    "elsewhere": (
        "A person must decide these approvals, not you: this client shows no approval forms (it declares no form "
        "elicitation) and this API key does not let the model approve its own calls. A person decides with "
        'POST /v1/cells/{cell}/wait {{"approvals": [{{"id", "approve", "reason"}}]}} over the HTTP API (or in the '
        "playground), and that answer carries what the cell did next; tell the user so."
    ),
    "dismissed": (
        "The person dismissed the approval form(s) without deciding; the cell is still parked. Call `wait` with "
        "cell_id {cell!r} to ask again, or `cancel` to stop it."
    ),
}


def marker_text(what: str, marker: Mapping[str, object]) -> str:
    """A truncation marker in words: how much is missing, what to do, and the prefix that was kept."""
    return (
        f"[{what} truncated: {marker.get('omittedBytes')} more bytes are not shown. {marker.get('guidance')} "
        f"The first part of its JSON follows.]\n{marker.get('prefix', '')}"
    )


def reference_text(marker: Mapping[str, object]) -> str:
    """An automatic reference in words: the result was saved whole and can be loaded in a later cell."""
    ref = marker.get("reference")
    ref = ref if isinstance(ref, Mapping) else {}
    return (
        f"[result too large for the output budget: saved whole as {ref.get('id')} ({ref.get('bytes')} bytes, "
        f"shape {_compact(ref.get('shape'))}). {marker.get('guidance')}]\n"
        f"Preview: {_compact(ref.get('preview'))}"
    )


def _items(value: object) -> Sequence[object]:
    """The entries of an envelope's list field (none when it is absent)."""
    return value if isinstance(value, list | tuple) else ()


def _compact(value: object) -> str:
    return jsoncodec.dumps_text(value)
