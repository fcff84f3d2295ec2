"""``tasks/get``, ``tasks/update`` and ``tasks/cancel`` on the cells that run as tasks (see ``tasks``)."""

from __future__ import annotations

from collections.abc import Mapping

from service.cluster.relay import held_elsewhere
from service.errors import CellNotFound, InvalidRequest
from service.runtime.envelopes import plain

from .approval_forms import ApprovalForm, approval_calls, decisions, forms_for
from .cell_tools import GLANCE_MS, CellTools, ToolAnswer
from .rounds import Caller
from .tasks import TaskRecord, TaskView

_UNKNOWN = (
    "task {task} is not known here: no task of yours has this id (a task is a cell started by exec for a client "
    "that takes tasks), or its result was delivered and is no longer kept"
)
_ENDED = ("completed", "failed")


class TaskCalls:
    """The task methods, for the caller's tenant, on the replica that holds the task's cell."""

    def __init__(self, cells: CellTools) -> None:
        self.cells = cells
        self.book = cells.tasks

    async def get(self, caller: Caller, task_id: str) -> TaskView:
        """The task's state now: a running cell is left alone; one that ended is collected into the result."""
        record = self._record(caller, task_id)
        async with record.busy:
            return await self._get(caller, record)

    async def _get(self, caller: Caller, record: TaskRecord) -> TaskView:
        if record.result is not None:
            return self._view(record, record.status)
        envelope = self._status(caller, record)
        if envelope is None:
            return self._view(record, record.status)
        if envelope["status"] in _ENDED:
            return self._ended(caller, record, await self.cells.resume(caller, record.cell_id, [], [], GLANCE_MS))
        calls = approval_calls(envelope)
        if calls:
            budget = self.cells.svc.settings.max_output_bytes
            return self._view(record, "input_required", forms_for(record.cell_id, calls, budget))
        if envelope["status"] == "waiting" and envelope.get("reason") == "yield":
            # It stopped to show the caller its progress: go on (what it wrote so far is kept with the task).
            return self._went_on(caller, record, await self.cells.resume(caller, record.cell_id, [], [], GLANCE_MS))
        return self._view(record, "working")

    async def update(self, caller: Caller, task_id: str, responses: Mapping[str, object]) -> None:
        """Apply a person's answers to the forms still outstanding (answers to other keys are ignored)."""
        record = self._record(caller, task_id)
        async with record.busy:
            await self._update(caller, record, responses)

    async def _update(self, caller: Caller, record: TaskRecord, responses: Mapping[str, object]) -> None:
        envelope = self._status(caller, record) if record.result is None else None
        outstanding = [str(c["id"]) for c in approval_calls(envelope or {})]
        approvals = decisions({k: v for k, v in responses.items() if k in outstanding}, outstanding)
        if approvals:
            self._went_on(caller, record, await self.cells.resume(caller, record.cell_id, [], approvals, GLANCE_MS))

    async def cancel(self, caller: Caller, task_id: str) -> None:
        record = self._record(caller, task_id)
        async with record.busy:
            await self._cancel(caller, record)

    async def _cancel(self, caller: Caller, record: TaskRecord) -> None:
        if record.result is not None:
            return  # it ended already: cancelling changes nothing
        try:
            envelope = await self.cells.cancel(caller, {"cell_id": record.cell_id})
        except CellNotFound as exc:
            self.book.finish(record, "failed", None, exc.message)
            return
        self.book.finish(record, "cancelled", None, _error_of(envelope) or "cancelled by the client")

    # ---- the record and the cell -------------------------------------------------------------------

    def _record(self, caller: Caller, task_id: str) -> TaskRecord:
        holder = held_elsewhere(self.cells.svc.replica, task_id)
        if holder is not None:
            raise InvalidRequest(
                f"task {task_id[:100]} is held by replica {holder}: send tasks/* requests with the Mcp-Name header "
                "set to the task id, which routes them there",
                need_param="taskId",
            )
        record = self.book.get(task_id, caller.key.tenant)
        if record is None:
            raise InvalidRequest(_UNKNOWN.format(task=task_id[:100]), need_param="taskId")
        return record

    def _status(self, caller: Caller, record: TaskRecord) -> dict[str, object] | None:
        """The cell's status as plain JSON (nothing collected); None when the cell is gone (the task failed)."""
        try:
            return plain(self.cells.svc.cells.status(record.cell_id, caller.key.tenant))
        except CellNotFound as exc:
            self.book.finish(record, "failed", None, exc.message)
            return None

    def _went_on(self, caller: Caller, record: TaskRecord, envelope: dict[str, object] | ToolAnswer) -> TaskView:
        """After resuming the cell: what it wrote so far is kept with the task; it may have ended already."""
        if isinstance(envelope, ToolAnswer) or envelope.get("status") in _ENDED:
            return self._ended(caller, record, envelope)
        output = envelope.get("output")
        self.book.touch(record, output if isinstance(output, list) else [])
        calls = approval_calls(envelope)
        if calls:
            budget = self.cells.svc.settings.max_output_bytes
            return self._view(record, "input_required", forms_for(record.cell_id, calls, budget))
        return self._view(record, "working")

    def _ended(self, caller: Caller, record: TaskRecord, envelope: dict[str, object] | ToolAnswer) -> TaskView:
        """The cell's final envelope (or the refusal met collecting it) becomes the task's outcome."""
        if isinstance(envelope, ToolAnswer):  # not an envelope: the service could not give the result
            self.book.finish(record, "failed", None, envelope.text)
            return self._view(record, "failed")
        later = envelope.get("output")
        envelope["output"] = record.output + (later if isinstance(later, list) else [])
        answer = self.cells.answer(caller, envelope)
        result: dict[str, object] = {
            "content": [{"type": "text", "text": answer.text}],
            "structuredContent": answer.structured,
            "isError": answer.is_error,
        }
        self.book.finish(record, "completed", result, None)
        return self._view(record, "completed")

    def view(self, record: TaskRecord) -> TaskView:
        """A task as it was just made or last seen (a new task is working)."""
        return self._view(record, record.status)

    def _view(self, record: TaskRecord, status: str, forms: tuple[ApprovalForm, ...] = ()) -> TaskView:
        return TaskView(record, status, int(self.book.ttl_seconds * 1000), forms)


def _error_of(envelope: ToolAnswer) -> str | None:
    structured = envelope.structured or {}
    error = structured.get("error")
    return str(error) if error is not None else None
