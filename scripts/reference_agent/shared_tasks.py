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


def http_send_of(gateway: Gateway, message_id: str) -> asyncio.Future[str | None] | None:
    """The HTTP side's send of this first message (it answers the task it started), or
    None when that side never got it."""
    handler = gateway.agent.http_handler()
    if handler is None or not message_id:
        return None
    return handler.send_of(message_id)


async def _remote(gateway: Gateway, entry: GatewayTask) -> str:
    """The HTTP side's task id, as soon as its task runs ("" if its send started none).
    Not only once the send answered: a blocking send answers when the task ends, and a
    cancel waiting for that came too late to cancel anything."""
    handler = gateway.agent.http_handler()
    send = entry.http_send
    while not entry.remote and send is not None:
        started = handler.started_task(entry.http_message) if handler is not None else None
        # Only once the SDK has saved it: the executor names the task as it hands the SDK
        # its first event, and a read before the save finds nothing, which :func:`follow`
        # takes for a task that is gone (it then told the platform nothing, ever).
        if started and await _read(handler, started) is not None:
            entry.remote = started
        elif send.done():
            entry.remote = send.result() or ""
            break
        else:
            await asyncio.wait({send}, timeout=READ_EVERY)
    return entry.remote


async def follow(gateway: Gateway, task_id: str, entry: GatewayTask) -> bool:
    """Send the HTTP side's task as ``task.update`` frames of the platform's ``task_id``
    while it changes, until it ends or asks; False when that side holds no task of it."""
    handler = gateway.agent.http_handler()
    remote = await _remote(gateway, entry)
    if handler is None or not remote:
        return False
    seen: tuple[Any, ...] = ()
    while True:
        task = await _read(handler, remote)
        if task is None:
            return True
        frame = _update_of(task_id, entry, task)
        now = (frame["status"].get("state"), len(task.artifacts), task.status.message.message_id)
        if now != seen:
            seen = now
            entry.last_update = frame
            await gateway.send_frame(frame)
        if task.status.state in RESTING:
            return True
        await asyncio.sleep(READ_EVERY)


async def answer(
    gateway: Gateway, task_id: str, entry: GatewayTask, message: dict[str, Any]
) -> bool:
    """A person's answer, for the HTTP side's task; then its updates, as :func:`follow`.
    False when that side holds no task of it (the answer is the socket side's)."""
    handler = gateway.agent.http_handler()
    remote = await _remote(gateway, entry)
    if handler is None or not remote:
        return False
    task = await _read(handler, remote)
    if task is None:
        log.warning("task %s: its HTTP side task is gone; the answer is dropped", task_id)
        return True
    turn = ParseDict(
        {**message, "taskId": remote, "contextId": task.context_id},
        Message(),
        ignore_unknown_fields=True,
    )
    request = SendMessageRequest(
        message=turn, configuration=SendMessageConfiguration(return_immediately=True)
    )
    await handler.on_message_send(request, ServerCallContext())
    return await follow(gateway, task_id, entry)


async def cancel(gateway: Gateway, task_id: str, entry: GatewayTask) -> bool:
    """Cancel the HTTP side's task (one that ended already stays as it is); then tell its
    end, as :func:`follow`. False when that side holds no task of it."""
    handler = gateway.agent.http_handler()
    remote = await _remote(gateway, entry)
    if handler is None or not remote:
        return False
    with contextlib.suppress(Exception):  # ended already: nothing to cancel
        await handler.on_cancel_task(CancelTaskRequest(id=remote), ServerCallContext())
    return await follow(gateway, task_id, entry)


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
