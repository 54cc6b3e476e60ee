"""One task, whichever side got its message: the WebSocket side follows a task that the
HTTP side runs already.

The platform sends a message over HTTP and, when that send fails, the same message (the
same ``messageId``) over the WebSocket. A send that failed only for the platform (its
answer was lost, or came too late) reached the HTTP side, which runs the task. Run again
on the socket, the skill ran twice. So an assignment whose message the HTTP side has
started a task with is not run: its updates on the socket are that task's
(:func:`follow`), a person's answer goes to that task (:func:`answer`), and so does a
cancel (:func:`cancel`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import ParseDict

from reference_agent.messages import to_json

if TYPE_CHECKING:
    from reference_agent.gateway import Gateway, GatewayTask

log = logging.getLogger("reference-agent.shared")

# Where a turn ends: the task ended, or it waits for a person's answer.
RESTING = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
READ_EVERY = 0.1  # seconds between two reads of the HTTP side's task (in process)


async def http_task_of(gateway: Gateway, message_id: str) -> str:
    """The id of the task the HTTP side started with this first message, or ``""``."""
    handler = gateway.agent.http_handler()
    if handler is None or not message_id:
        return ""
    return await handler.task_of(message_id) or ""


async def follow(gateway: Gateway, task_id: str, entry: GatewayTask) -> None:
    """Send the HTTP side's task as ``task.update`` frames of the platform's ``task_id``
    while it changes, until it ends or asks."""
    handler = gateway.agent.http_handler()
    seen: tuple[Any, ...] = ()
    while handler is not None:
        task = await _read(handler, entry.remote)
        if task is None:
            return
        frame = _update_of(task_id, entry, task)
        now = (frame["status"].get("state"), len(task.artifacts), task.status.message.message_id)
        if now != seen:
            seen = now
            entry.last_update = frame
            await gateway.send_frame(frame)
        if task.status.state in RESTING:
            return
        await asyncio.sleep(READ_EVERY)


async def answer(
    gateway: Gateway, task_id: str, entry: GatewayTask, message: dict[str, Any]
) -> None:
    """A person's answer, for the HTTP side's task; then its updates, as :func:`follow`."""
    handler = gateway.agent.http_handler()
    task = await _read(handler, entry.remote) if handler is not None else None
    if handler is None or task is None:
        log.warning("task %s: its HTTP side task is gone; the answer is dropped", task_id)
        return
    turn = ParseDict(
        {**message, "taskId": entry.remote, "contextId": task.context_id},
        Message(),
        ignore_unknown_fields=True,
    )
    request = SendMessageRequest(
        message=turn, configuration=SendMessageConfiguration(return_immediately=True)
    )
    await handler.on_message_send(request, ServerCallContext())
    await follow(gateway, task_id, entry)


async def cancel(gateway: Gateway, entry: GatewayTask) -> None:
    """Cancel the HTTP side's task (one that ended already stays as it is)."""
    handler = gateway.agent.http_handler()
    if handler is not None:
        with contextlib.suppress(Exception):  # ended already: nothing to cancel
            await handler.on_cancel_task(CancelTaskRequest(id=entry.remote), ServerCallContext())


async def _read(handler: Any, remote: str) -> Task | None:
    with contextlib.suppress(Exception):  # gone (the SDK raises TaskNotFoundError)
        return await handler.on_get_task(GetTaskRequest(id=remote), ServerCallContext())
    return None


def _update_of(task_id: str, entry: GatewayTask, task: Task) -> dict[str, Any]:
    """The HTTP side's task as a ``task.update`` of the platform's task (its ids, not
    the HTTP side's, in the status message)."""
    status = to_json(task.status)
    if isinstance(status.get("message"), dict):
        status["message"].update(taskId=task_id, contextId=entry.context_id)
    frame: dict[str, Any] = {"type": "task.update", "taskId": task_id, "status": status}
    if task.artifacts:
        frame["artifacts"] = [to_json(artifact) for artifact in task.artifacts]
    return frame
