"""A task-capable MCP client, written on the official Python SDK's low-level pieces: no released client
speaks the tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) yet.

``Tasks`` is a client extension: declared, it is advertised in each request's capabilities, and the SDK's
``Client.call_tool`` hands a ``resultType: "task"`` answer to its resolver, which polls ``tasks/get`` (the
``Mcp-Name`` header set to the task id, as the extension requires), shows a form of an ``input_required``
task to the person and sends the answers with ``tasks/update``, until the task completes: its result is the
tool result ``call_tool`` returns.  It records every status it saw.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

TASKS = "io.modelcontextprotocol/tasks"

#: Answers one form: (its message, its schema) -> the person's elicitation result.
Person = Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult]]


class Task(types.Result):
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class CreateTaskResult(Task):
    result_type: Literal["task"] = "task"


class DetailedTask(Task):
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, types.ElicitResult]


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), types.EmptyResult)


class Tasks(ClientExtension):
    identifier = TASKS

    def __init__(self, person: Person | None = None) -> None:
        self.person = person
        self.created: list[CreateTaskResult] = []
        self.seen: list[str] = []  # every status a poll answered, in order

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        answered: set[str] = set()
        while True:
            task = await get_task(ctx.session, created.task_id)
            self.seen.append(task.status)
            if task.status == "completed":
                assert task.result is not None
                return types.CallToolResult.model_validate(task.result)
            if task.status in ("failed", "cancelled"):
                error = task.error or {"code": -32603, "message": task.status_message or task.status}
                raise MCPError(error["code"], error["message"])
            if task.status == "input_required" and task.input_requests and self.person is not None:
                fresh = {k: v for k, v in task.input_requests.items() if k not in answered}
                if fresh:
                    responses = {}
                    for key, request in fresh.items():
                        params = types.ElicitRequestFormParams.model_validate(request["params"])
                        responses[key] = await self.person(params)
                    update = UpdateTask(params=UpdateParams(task_id=created.task_id, input_responses=responses))
                    await ctx.session.send_request(update, types.EmptyResult)
                    answered |= set(fresh)
                    continue
            await anyio.sleep((task.poll_interval_ms or 500) / 1000)
