"""The agent's task and context ids an answer brings: kept whole, and only for the task
they belong to.

An answer names the agent's task; the platform follows that task by its id (polls,
cancels, listings). So an id is refused, never cut, past what its column keeps (a cut id
names no task of the agent's, or another's), and an answer about another agent task than
the one a platform task follows is refused: polling, cancelling or completing with it
would act on someone else's work. Used by :func:`a2a.agent_updates.apply_agent_update`
before anything of an answer is applied.
"""

from __future__ import annotations

from typing import Any

from a2a.exceptions import A2AProtocolError
from a2a.models import Task
from a2a.states import NextAction
from a2a.transports.base import AgentReply
from a2a.transports.quoting import excerpt

# What the columns hold, read from the model so the check follows a migration: an id is
# refused past it, never cut (a cut id names no task of the agent's, or another's).
ID_LIMITS = {
    "remote_task_id": Task._meta.get_field("remote_task_id").max_length,
    "remote_context_id": Task._meta.get_field("remote_context_id").max_length,
}


def remote_fields(task: Task, remote: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's task and context ids that ``remote`` (the agent's Task) brings, as the
    task's fields to store with the answer.

    Raises :class:`A2AProtocolError` (nothing of the answer is applied) for an id longer
    than its column holds, and for an answer about another agent task than the one the
    task follows, unless it is the answer to a first message being sent
    (:func:`_names_its_task`). The context id may change: it is no task's id.
    """
    fields: dict[str, Any] = {}
    if not isinstance(remote, dict):
        return fields
    rid, rctx = remote.get("id"), remote.get("contextId")
    if isinstance(rid, str) and rid and rid != task.remote_task_id:
        _check_length(task, "remote_task_id", "task id", rid)
        if task.remote_task_id and not _names_its_task(task):
            # Polling, cancelling or completing with that task would act on someone
            # else's work (another platform task's, or another client's of the agent).
            # The agent's id is named by an excerpt (as in cancel_state): it may hold a
            # NUL or a lone surrogate, and the error is stored (PostgreSQL refuses those).
            said, ours = excerpt(rid), excerpt(task.remote_task_id)
            raise A2AProtocolError(
                f"Agent '{task.agent_id}' answered about its task {said!r}, but this task "
                f"follows its task {ours!r}; the answer was not applied.",
                {"remoteTaskId": ours, "answeredTaskId": said},
            )
        fields["remote_task_id"] = rid
    if isinstance(rctx, str) and rctx and rctx != task.remote_context_id:
        _check_length(task, "remote_context_id", "context id", rctx)
        fields["remote_context_id"] = rctx
    return fields


def _check_length(task: Task, field: str, what: str, value: str) -> None:
    """Refuse an agent's id longer than the column ``field`` holds."""
    limit = ID_LIMITS[field]
    if limit is not None and len(value) > limit:
        raise A2AProtocolError(
            f"Agent '{task.agent_id}' sent a {what} of {len(value)} characters, longer "
            f"than the {limit} the platform keeps; the answer was not applied (a shortened "
            "id would name no task of the agent's).",
            {"field": what, "maxLength": limit, "length": len(value)},
        )


def _names_its_task(task: Task) -> bool:
    """Whether the answer being applied may name a new agent task: the answer to the
    task's first message, which the worker is sending now (the action is still the send,
    the message carries no agent task id). A first message sent again another way (the
    agent could not be polled or streamed) may start a new task at the agent; any other
    answer (a poll, a subscribe's or a sending stream's later event, a follow-up's answer,
    a push, a listing) is about the task already known."""
    first_message = not (task.outbound_message or {}).get("taskId")
    return task.next_action == NextAction.SEND and first_message


def cancel_state(task: Task, reply: AgentReply) -> str | None:
    """The state the agent's answer to the cancel of the task's agent task gives it.

    Raises :class:`A2AProtocolError` for an answer about another agent task: its state is
    that task's, and recorded as this one's it said this one was canceled."""
    answered = (reply.task or {}).get("id")
    if isinstance(answered, str) and answered and answered != task.remote_task_id:
        raise A2AProtocolError(
            f"Agent '{task.agent_id}' answered the cancel of its task "
            f"{excerpt(task.remote_task_id)!r} about its task {excerpt(answered)!r}; its "
            "state was not taken for this task's.",
            {"remoteTaskId": task.remote_task_id, "answeredTaskId": excerpt(answered)},
        )
    return reply.state
