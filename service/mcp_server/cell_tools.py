"""The facade's cell tools, ``exec``, ``wait`` and ``cancel``, and the approval rounds they may answer with.

Each reaches the cell registry exactly as the HTTP routes do (``cell_spec`` builds the cell, ``svc.cells``
runs it), or the replica that holds the cell through its own HTTP route, so every limit, cap and tenant
boundary of the HTTP API applies.  An answer is a tool result (``ToolAnswer``: the model's text and the
envelope as plain JSON) or, when the cell waits on approvals and the client shows forms to a person, an
approval round (``InputNeeded``, see ``rounds``).

Who decides an approval:

* a person, through the client's forms, when the client declared form elicitation;
* the model, through ``wait``'s ``approvals`` argument, only when the API key allows it
  (``mcp_model_approvals``): then the model approves its own calls;
* otherwise a person over the HTTP API (``POST /v1/cells/<id>/wait``), which the model is told.

For a client that takes tasks, ``exec`` runs a background cell and answers a task (``TaskStarted``) when the
cell outlives the exec's ``timeout_ms`` (see ``tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from bridge import jsoncodec
from service.api.exec import cell_spec, parsed, wait_answers
from service.api.parked import take_up_parked
from service.api.schemas import ID_PATTERN, ExecRequest, WaitRequest
from service.assembly import Components
from service.cluster.relay import ServeHere, call_holder, held_elsewhere
from service.errors import InvalidRequest
from service.runtime.envelopes import plain
from service.settings import ApiKey

from .rendering import Approver, envelope_text
from .request_state import LocalLedger, SharedLedger, request_digest
from .rounds import ApprovalRounds, Caller, InputNeeded, RoundReply, answers_of
from .tasks import TaskBook, TaskRecord

EXEC_FIELDS = ("code", "title", "session_id", "run_id", "timeout_ms", "max_output_bytes", "language")
WAIT_FIELDS = ("timeout_ms", "tool_results", "approvals")  # besides cell_id
MAX_OUTPUT_BYTES = 10 * 1024 * 1024  # the largest output budget a cell may have (max_output_bytes)
RELAY_SLACK_BYTES = 1024 * 1024  # an envelope's own fields and JSON punctuation
#: How long a round that decided nothing looks at the cell before answering (the least a wait may take).
GLANCE_MS = 100

MODEL_MAY_NOT_APPROVE = (
    "approvals: this API key does not let the model answer approvals over MCP (the model would approve its "
    "own calls). A person decides: through this client's approval forms when it declares form elicitation, "
    'or with POST /v1/cells/{cell}/wait {{"approvals": [...]}} over the HTTP API; the operator can allow '
    "model approvals for the key with mcp_model_approvals = true"
)


@dataclass(frozen=True)
class ToolAnswer:
    """One tool result: ``text`` for the model, ``structured`` for programs, ``is_error`` for failures."""

    text: str
    structured: dict[str, object] | None
    is_error: bool


@dataclass(frozen=True)
class TaskStarted:
    """A tool call's answer that the cell goes on as a task (``resultType: "task"``)."""

    record: TaskRecord


Outcome = ToolAnswer | InputNeeded | TaskStarted
M = TypeVar("M", bound=BaseModel)


class CellRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cell_id: str = Field(pattern=ID_PATTERN, description="cell id from an envelope")


class CellTools:
    """``exec``, ``wait`` and ``cancel`` for one caller at a time, with their approval rounds."""

    def __init__(self, svc: Components) -> None:
        self.svc = svc
        ledger = svc.store if isinstance(svc.store, SharedLedger) else LocalLedger()
        self.rounds = ApprovalRounds(ledger, svc.settings.max_output_bytes)
        # A background cell runs on its own at most cell_ttl_seconds, and its result is kept as long again.
        self.tasks = TaskBook(2 * svc.settings.cell_ttl_seconds)

    def model_approves(self, key: ApiKey) -> bool:
        """Whether the model behind ``key`` may answer approvals through ``wait`` (opt-in, off by default)."""
        return key.mcp_model_approvals if key.key else self.svc.settings.mcp_model_approvals

    async def exec(self, caller: Caller, args: Mapping[str, object]) -> Outcome:
        body = validated(ExecRequest, args, EXEC_FIELDS)
        request = request_digest("exec", args)
        if caller.uses_tasks:
            return await self._exec_as_task(caller, body, request)
        spec = await cell_spec(self.svc.cells, self.svc.tools, caller.key, body)
        envelope = plain(await self.svc.cells.exec(spec, caller.trace_parent))
        return await self._outcome(caller, request, envelope)

    async def _exec_as_task(self, caller: Caller, body: ExecRequest, request: str) -> Outcome:
        """A background cell: answered as usual if it ends or needs a person within the exec's timeout_ms,
        else as a task (the task exists before the answer: a poll finds it)."""
        cells = self.svc.cells
        spec = await cell_spec(cells, self.svc.tools, caller.key, body.model_copy(update={"background": True}))
        started = await cells.exec(spec, caller.trace_parent)
        cell_id = str(started["cell_id"])
        run = cells.background.get(cell_id, caller.key.tenant)
        if run is None:  # refused before it ran (an input refusal): its envelope is the answer
            return self.answer(caller, plain(started))
        timeout_ms = spec.limits.timeout_ms
        await run.until_stopped(timeout_ms / 1000)  # collects nothing: the output stays for the answer
        if run.active:
            return TaskStarted(self.tasks.open(cell_id, caller.key.tenant, []))
        return await self._outcome(caller, request, await self.resume(caller, cell_id, [], [], timeout_ms))

    async def wait(self, caller: Caller, args: Mapping[str, object]) -> Outcome:
        ref, body = _wait_args(args)
        results, approvals = wait_answers(body)
        if approvals and not self.model_approves(caller.key):
            raise InvalidRequest(MODEL_MAY_NOT_APPROVE.format(cell=ref.cell_id), need_param="approvals")
        envelope = await self.resume(caller, ref.cell_id, results, approvals, body.timeout_ms)
        return await self._outcome(caller, request_digest("wait", args), envelope)

    async def cancel(self, caller: Caller, args: Mapping[str, object]) -> ToolAnswer:
        ref = validated(CellRef, args, ("cell_id",))
        relayed = await self._on_holder(caller, ref.cell_id, "cancel", {})
        if relayed is None:
            relayed = plain(await self.svc.cells.cancel(ref.cell_id, caller.key.tenant, caller.trace_parent))
        return self.answer(caller, relayed)

    async def answered(self, caller: Caller, name: str, args: Mapping[str, object], reply: RoundReply) -> Outcome:
        """A retried ``exec`` or ``wait`` carrying a person's answers: they resume the cell the round was
        about, which is not started (or resumed with the call's own answers) a second time."""
        if name not in ("exec", "wait"):
            raise InvalidRequest(f"{name} asks no approvals: it takes no inputResponses", need_param="inputResponses")
        timeout_ms = _timeout_of(name, args)
        request = request_digest(name, args)
        claims, approvals = await self.rounds.opened(caller, request, reply)
        return await self._decided(caller, request, claims.cell_id, approvals, timeout_ms, claims.output)

    async def decided(
        self,
        caller: Caller,
        name: str,
        args: Mapping[str, object],
        needed: InputNeeded,
        responses: Mapping[str, object],
    ) -> Outcome:
        """A round answered on the same connection (2025-11-25 elicitation requests): nothing left this process."""
        approvals = answers_of(needed, responses)
        timeout_ms = _timeout_of(name, args)
        return await self._decided(caller, needed.request, needed.cell_id, approvals, timeout_ms, needed.output)

    async def _decided(
        self,
        caller: Caller,
        request: str,
        cell_id: str,
        approvals: list[dict[str, object]],
        timeout_ms: int | None,
        earlier: list[object],
    ) -> Outcome:
        """Resume the cell with a round's answers; its answer shows first the output of before the round."""
        dismissed = not approvals  # every form was dismissed: show where the cell is, without asking again
        envelope = await self.resume(caller, cell_id, [], approvals, GLANCE_MS if dismissed else timeout_ms)
        if not isinstance(envelope, ToolAnswer) and earlier:
            later = envelope.get("output")
            envelope["output"] = earlier + (later if isinstance(later, list) else [])
        if dismissed:
            return self.answer(caller, envelope, "dismissed")
        return await self._outcome(caller, request, envelope)

    async def _outcome(self, caller: Caller, request: str, envelope: dict[str, object] | ToolAnswer) -> Outcome:
        """A round for a person when the cell waits on approvals and the client shows forms, else the answer."""
        if isinstance(envelope, ToolAnswer):
            return envelope
        cell_id = str(envelope.get("cell_id"))
        # A background cell still running goes on as a task, kept here: only a cell this replica holds.
        if caller.uses_tasks and envelope.get("status") == "running" and not held_elsewhere(self.svc.replica, cell_id):
            output = envelope.get("output")
            return TaskStarted(self.tasks.open(cell_id, caller.key.tenant, output if isinstance(output, list) else []))
        needed = await self.rounds.ask(caller, request, envelope)
        return needed if needed is not None else self.answer(caller, envelope)

    def answer(
        self, caller: Caller, envelope: dict[str, object] | ToolAnswer, approver: Approver | None = None
    ) -> ToolAnswer:
        """A (plain) envelope as a tool result: its words for the model and, beside them, the envelope."""
        if isinstance(envelope, ToolAnswer):
            return envelope
        if approver is None:
            approver = "model" if self.model_approves(caller.key) else "elsewhere"
        return ToolAnswer(envelope_text(envelope, approver), envelope, envelope.get("status") == "failed")

    async def resume(
        self,
        caller: Caller,
        cell_id: str,
        results: list[dict[str, object]],
        approvals: list[dict[str, object]],
        timeout_ms: int | None,
    ) -> dict[str, object] | ToolAnswer:
        """Resume the cell (here or on its holder) with these answers until its next stop (a plain envelope)."""
        relay: dict[str, object] = {"tool_results": results, "approvals": approvals}
        if timeout_ms is not None:
            relay["timeout_ms"] = timeout_ms
        relayed = await self._on_holder(caller, cell_id, "wait", relay)
        if relayed is not None:
            return relayed
        ended = await take_up_parked(self.svc.cells, self.svc.tools, caller.key, cell_id)  # its replica stopped
        if ended is not None:
            return plain(ended)
        envelope = await self.svc.cells.wait(
            cell_id,
            caller.key.tenant,
            timeout_ms=timeout_ms,
            tool_results=results,
            approvals=approvals,
            trace_parent=caller.trace_parent,
        )
        return plain(envelope)

    async def _on_holder(
        self, caller: Caller, cell_id: str, action: str, body: Mapping[str, object]
    ) -> dict[str, object] | ToolAnswer | None:
        """The answer of the replica holding ``cell_id`` when that is another one (None: this one holds it).

        The holder's own HTTP route serves it, as for a relayed HTTP request: it authenticates the key
        and applies its checks (tenant, the one wait at a time).
        """
        replica = self.svc.replica
        holder = held_elsewhere(replica, cell_id)
        if holder is None:
            return None
        settings = self.svc.settings
        # An envelope holds at most the output budget and the pending inputs the inbox allows.
        cap = settings.max_snapshot_bytes + MAX_OUTPUT_BYTES + RELAY_SLACK_BYTES
        headers = self.svc.tracing.headers_for(caller.trace_parent)
        key = caller.key.key
        try:
            answer = await call_holder(replica, holder, cell_id, action, key, jsoncodec.dumps(body), headers, cap)
        except ServeHere:  # its replica stopped and this one holds the cell now, or takes it up
            return None
        try:
            found = jsoncodec.loads(answer.body)
        except ValueError:
            found = None
        if answer.status == 200 and isinstance(found, dict):
            return found
        error = found.get("error") if isinstance(found, dict) else None
        if not isinstance(error, dict):
            error = {
                "code": "replica_unavailable",
                "error_type": "transient",
                "message": f"the replica holding cell {cell_id} answered HTTP {answer.status} without an error body; "
                "retry shortly",
            }
        return refusal(error, answer.retry_after)


def validated(model: type[M], args: Mapping[str, object], fields: tuple[str, ...]) -> M:
    """``args`` checked by ``model``; only ``fields`` are accepted, errors name the argument."""
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise InvalidRequest(
            f"unknown argument {unknown[0][:64]!r}; this tool takes {', '.join(fields)}", need_param=unknown[0][:64]
        )
    return parsed(model, args)


def _wait_args(args: Mapping[str, object]) -> tuple[CellRef, WaitRequest]:
    ref = validated(CellRef, {k: args[k] for k in ("cell_id",) if k in args}, ("cell_id",))
    body = validated(WaitRequest, {k: v for k, v in args.items() if k != "cell_id"}, WAIT_FIELDS)
    return ref, body


def _timeout_of(name: str, args: Mapping[str, object]) -> int | None:
    """The wall clock a retried call asked for (its other arguments took effect when it was first made)."""
    if name == "exec":
        return validated(ExecRequest, args, EXEC_FIELDS).timeout_ms
    return _wait_args(args)[1].timeout_ms


def refusal(err: Mapping[str, object], retry_after: int | None) -> ToolAnswer:
    """A refused request in words; its error body is not an envelope, so it has no structuredContent."""
    retry = f" Retry after {retry_after} s." if retry_after is not None else ""
    return ToolAnswer(f"Refused ({err.get('code')}, {err.get('error_type')}): {err.get('message')}{retry}", None, True)
