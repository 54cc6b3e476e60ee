"""The A2A face's message-sending path: SendMessage and SendStreamingMessage.

Validates the message, chooses the skill (and agent, on a tenant route), puts the caller's
``contextId`` and ``messageId`` in the caller's namespace (:mod:`a2a.face.ids`), relays the
message to :func:`a2a.creation.create_task` or :func:`a2a.services.reply_to_task`,
attaches a push config that came with it, then either answers at once or waits (bounded)
for the task to settle. Domain errors of the services pass through unchanged (the face's
error table turns them into A2A errors).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from a2a import creation, lookups, services
from a2a.creation import CallerGone, ForAgent, foreign_key_violation, refuse_if_caller_gone
from a2a.face import hybrid, push_configs, queries, sse
from a2a.face.context import CallContext, principal_cache
from a2a.face.db import db_call
from a2a.face.errors import InvalidParams, Unauthenticated, UnsupportedOperation
from a2a.face.ids import (
    REFERENCED,
    REFERENCES,
    Referenced,
    agent_sides,
    caller_tag,
    message_toward_agent,
    referenced_rows,
    references_toward,
    task_ids,
    toward_agent,
)
from a2a.face.params import opt_bool, opt_int, opt_str_list
from a2a.face.send_checks import choose_skill, has_data, input_of, validate_send
from a2a.face.serializers import (
    OUTPUT_MODES,
    agent_message,
    caller_context,
    task_json,
)
from a2a.face.stream_slots import Slot, stream_slots
from a2a.face.visibility import visible_task, visible_tasks
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.states import TaskState

# What the dispatcher records when an agent answers with a bare Message.
MESSAGE_ARTIFACT_ID = "message"


def referenced(ctx: CallContext, message: dict[str, Any]) -> dict[str, Referenced]:
    """The tasks the message's ``referenceTaskIds`` name that this caller may see, each as
    ``(agent id, the id that agent knows it by)``: the agent's own task id, or, for a task
    the gateway carries, ours (its frames name tasks so). A task the agent never got
    (not sent yet, or answered with a bare Message) is left out, as is any other id."""
    wanted = task_ids(message.get("referenceTaskIds"))
    if not wanted:
        return {}
    return agent_sides(referenced_rows(visible_tasks(ctx), wanted), wanted)


def _for_agent(known: dict[str, Referenced]) -> ForAgent:
    """The hook :func:`a2a.creation.create_task` calls once the agent is chosen: the
    message with its references for that agent, and the task metadata that records them."""

    def for_agent(agent_id: str, message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        relayed, mapped = references_toward(message, known, agent_id)
        metadata: dict[str, Any] = {REFERENCES: mapped} if mapped else {}
        if known:
            metadata[REFERENCED] = list(known)
        return relayed, metadata

    return for_agent


def _send_sync(
    ctx: CallContext, params: dict[str, Any], *, watched: bool, modes: list[str]
) -> tuple[Task, int | None]:
    """Create the task (or answer an existing one); returns it and, for a follow-up, the
    event sequence number the answer must move past. ``watched``: the caller will wait
    for it or stream it, or gave a push config (a new task is stored watched, so neither
    needs another write); ``modes``: the output modes the caller accepts, kept on the
    task (:func:`a2a.face.serializers.text_only`). The message's ``referenceTaskIds`` go
    to the agent as its own ids (:func:`a2a.face.ids.references_toward`)."""
    message = params["message"]
    tag = caller_tag(ctx)
    message_id = message_toward_agent(message["messageId"])
    references = "referenceTaskIds" in message
    known = referenced(ctx, message) if references else {}
    if message.get("taskId"):
        task = visible_task(ctx, message["taskId"])
        mine = caller_context(task)
        if message.get("contextId") and message["contextId"] != mine:
            raise InvalidParams(
                f"contextId {message['contextId']!r} does not match task {task.id}'s "
                f"context {mine!r}.",
                metadata={"taskId": str(task.id), "contextId": mine},
                violations=[("message.contextId", "does not match the task's context")],
            )
        if task.is_terminal:
            raise UnsupportedOperation(
                f"Task {task.id} is {task.state}, a final state: it accepts no messages.",
                metadata={"taskId": str(task.id), "state": task.state},
            )
        # Counted before the reply: an interruption the agent reports quickly (even
        # within reply_to_task) is then still newer than the reply's own transition.
        before = TaskEvent.objects.filter(task=task).count()
        message, mapped = references_toward(message, known, task.agent_id)

        def ours(metadata: dict[str, Any]) -> dict[str, Any]:
            # Onto the metadata of the locked row (another reply may have written its own
            # meanwhile), by the reply's transition: a refused reply keeps none of it.
            if modes:
                metadata[OUTPUT_MODES] = modes
            if mapped:
                metadata[REFERENCES] = {**(metadata.get(REFERENCES) or {}), **mapped}
            return metadata

        relayed = {**message, "messageId": message_id, "contextId": task.context_id}
        task = services.reply_to_task(task, message=relayed, by=ctx.user, metadata_update=ours)
        task.refresh_from_db()
        return task, before + 1
    skill_id, agent_id = choose_skill(ctx, params)
    context_id = toward_agent(tag, message.get("contextId") or str(uuid.uuid4()))
    continued = message.get("contextId") and agent_id is None
    task = creation.create_task(
        skill_id=skill_id,
        input=input_of(message),
        agent_id=agent_id,
        user=ctx.user,
        agent_caller=ctx.agent_caller,
        message={**message, "messageId": message_id, "contextId": context_id},
        context_id=context_id,
        origin="a2a",
        validate_input=has_data(message),
        watched=watched,
        metadata=_new_metadata(params, modes),
        for_agent=_for_agent(known) if references else None,
        prefer_agent=conversation_agent(ctx, context_id, skill_id) if continued else None,
    )
    return task, None


def conversation_agent(ctx: CallContext, context_id: str, skill_id: str) -> str | None:
    """The agent of the caller's latest task of ``skill_id`` in the context: a conversation
    goes on with the agent that holds it (the matcher, picking by load, sent every other
    message of one conversation to another agent of the skill, each seeing half of it)."""
    return (
        visible_tasks(ctx)
        .filter(context_id=context_id, skill_id=skill_id)
        .order_by("-created_at", "-id")
        .values_list("agent_id", flat=True)
        .first()
    )


def _new_metadata(params: dict[str, Any], modes: list[str]) -> dict[str, Any] | None:
    """A new task's metadata of the send: the output modes the caller takes, and the mix
    a FastA2A client sent it in (:mod:`a2a.face.hybrid`: its reads are answered so)."""
    metadata: dict[str, Any] = {OUTPUT_MODES: modes} if modes else {}
    if params.get(hybrid.KEY):
        metadata[hybrid.DIALECT] = params[hybrid.KEY]
    return metadata or None


def send_and_attach(
    ctx: CallContext, params: dict[str, Any], *, streaming: bool = False
) -> tuple[Task, int | None, dict[str, Any]]:
    """One database hop: authenticate, validate everything, then create the task (or
    answer one) and attach the push config that came with it. ``streaming``: the caller
    streams the task (``SendStreamingMessage``). A caller deleted while this process's
    token cache held it gets the 401 its token now gets, not a 500."""
    ctx.require_caller()
    try:
        return _send_and_attach(ctx, params, streaming=streaming)
    except CallerGone:
        principal_cache.forget(ctx.raw_token or "")
        raise Unauthenticated("Invalid or revoked token.") from None


def _send_and_attach(
    ctx: CallContext, params: dict[str, Any], *, streaming: bool
) -> tuple[Task, int | None, dict[str, Any]]:
    validate_send(params)
    config = params.get("configuration") or {}
    opt_int(config, "historyLength", low=0)
    opt_bool(config, "returnImmediately")
    modes = opt_str_list(config, "acceptedOutputModes")
    push_config = config.get("taskPushNotificationConfig")
    if push_config is not None:
        push_configs.clean_config(push_config)
    waits = streaming or not config.get("returnImmediately")
    watched = waits or push_config is not None
    if push_config is None:
        task, since_seq = _send_sync(ctx, params, watched=watched, modes=modes)
        return task, since_seq, config
    # One transaction: the task is started on its commit, once its config exists. Stored
    # after that commit, the config missed an end that came first (an instant agent).
    for last in (False, True):
        try:
            with transaction.atomic():
                task, since_seq = _send_sync(ctx, params, watched=watched, modes=modes)
                push_configs.create_config(task, {**push_config, "taskId": str(task.id)})
            return task, since_seq, config
        except IntegrityError as exc:
            # Foreign keys are checked at the commit, where create_task's own second
            # choice cannot see it: the agent this process's registry cache still held was
            # deleted by another one. Nothing was written; choose again from the database.
            if not foreign_key_violation(exc):
                raise
            refuse_if_caller_gone(ctx.user, ctx.agent_caller)  # or the caller was
            if last:
                raise
            lookups.clear()
    raise AssertionError("not reached: the second attempt returns or raises")


def message_answer(task: Task) -> dict[str, Any] | None:
    """The agent's bare Message, when that was its whole answer to a new task."""
    if task.state != TaskState.COMPLETED or task.remote_task_id:
        return None
    artifacts = task.artifacts or []
    if len(artifacts) != 1 or not isinstance(artifacts[0], dict):
        return None
    if artifacts[0].get("artifactId") != MESSAGE_ARTIFACT_ID:
        return None
    last = queries.last_from_agent(task)
    if last is None or not isinstance(last.message, dict):
        return None
    return last.message if last.message.get("parts") == artifacts[0].get("parts") else None


def _answer(task_id: uuid.UUID, history_length: int | None) -> dict[str, Any]:
    task = Task.objects.get(pk=task_id)
    reply = message_answer(task)
    if reply is not None:
        return {"message": agent_message(task, reply)}
    history = queries.history(task, history_length) if history_length != 0 else None
    return {"task": task_json(task, history=history, history_length=history_length)}


async def send_message(params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """SendMessage: the task at once (``returnImmediately``), or once it settled: the
    agent's bare Message when that was its answer, else the task."""

    def start() -> tuple[Task, int | None, int | None, dict[str, Any] | None]:
        task, since_seq, config = send_and_attach(ctx, params)
        history_length = opt_int(config, "historyLength", low=0)
        if not opt_bool(config, "returnImmediately"):
            return task, since_seq, history_length, None
        if since_seq is None and task.outbound_message:
            # A new task: its history is the message just relayed (no query needed).
            relayed = TaskMessage(direction=Direction.TO_AGENT, message=task.outbound_message)
            payload = task_json(task, history=[relayed], history_length=history_length)
        else:
            history = queries.history(task, history_length) if history_length != 0 else None
            payload = task_json(task, history=history, history_length=history_length)
        return task, since_seq, history_length, {"task": payload}

    task, since_seq, history_length, answer = await db_call(start)()
    if answer is not None:
        return answer
    await sse.wait_until_settled(
        task.id, since_seq=since_seq, seconds=settings.A2A_BLOCKING_TIMEOUT, watched=task.watched
    )
    return await db_call(_answer)(task.id, history_length)


async def stream_message(
    params: dict[str, Any], ctx: CallContext
) -> AsyncIterator[dict[str, Any] | None]:
    """Send, then stream: the Task first, then status/artifact updates until the task
    ends or asks again."""

    def start() -> tuple[Task, int | None, int | None, Slot]:
        ctx.require_caller()
        slot = stream_slots.take(ctx)  # before the send: a refused stream creates no task
        try:
            task, since_seq, config = send_and_attach(ctx, params, streaming=True)
        except BaseException:
            slot.release()
            raise
        # Should the caller be gone by now, the slot goes back as it is dropped.
        return task, since_seq, opt_int(config, "historyLength", low=0), slot

    task, since_seq, history_length, slot = await db_call(start)()
    # historyLength bounds the first event's Task, as it bounds message:send's answer
    # (the server MUST NOT return more messages than asked for).
    return sse.task_stream(
        task.id,
        watched=task.watched,
        sent=True,
        since_seq=since_seq,
        slot=slot,
        history_length=history_length,
    )
