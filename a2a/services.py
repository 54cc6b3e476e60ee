"""Platform tasks: create, follow, answer, cancel and retry (the dispatcher's business rules).

Views, the admin, Celery tasks, the gateway and the A2A face all call these functions;
none of them change a task any other way. The HTTP side of talking to agents lives in
:mod:`a2a.agent_client`, the worker loop (claims, polls, sweeps) in :mod:`a2a.worker`.

Seams other parts extend:

* :func:`deliver_followup` sends a reply or a cancel to the agent: over A2A when
  ``task.transport == "a2a"``, else as gateway frames (``gateway.services.send_followup``).
* :func:`handle_send_failure` decides what a failed send means: retry with backoff for
  transient errors while attempts remain, then fall back to the gateway
  (``gateway.fallback``: at once for 4xx, agents without an endpoint, or agents online
  on the socket); answers that are not A2A fail the task.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from a2a.exceptions import (
    A2ACallError,
    A2AProtocolError,
    InputInvalid,
    UnknownAgent,
    UnknownSkill,
)
from a2a.models import Direction, InvalidTransition, Task, TaskEvent, TaskMessage
from a2a.signals import task_changed
from a2a.states import (
    ACTIVE_STATES,
    INTERRUPTED_STATES,
    NextAction,
    TaskState,
    Transport,
    normalize_state,
)
from a2a.wire import (
    collect_output,
    message_text,
    relay_message,
    schema_errors,
    user_message,
)
from agent_profiles.matching import match_agent
from agent_profiles.models import AgentProfile, Skill
from platform_site.errors import Conflict, ValidationFailed

log = logging.getLogger(__name__)

__all__ = [
    "apply_agent_update",
    "cancel_task",
    "create_task",
    "deliver_followup",
    "handle_send_failure",
    "queue_processing",
    "record_message",
    "reply_to_task",
    "retry_task",
]


# --- helpers ------------------------------------------------------------------------


def _deadline() -> Any:
    return timezone.now() + timedelta(seconds=settings.A2A_TASK_TIMEOUT)


def max_attempts(task: Task) -> int:
    """Sends allowed per message for transient errors (the skill's, else the setting)."""
    return int(task.skill.max_attempts or settings.A2A_MAX_ATTEMPTS)


def queue_processing(task_id: Any, countdown: float | None = None) -> None:
    """After commit, ask a worker to do the task's next action now (or in ``countdown`` s).

    Only a hint: if the broker loses it, the sweep finds the due task anyway.
    """

    def send() -> None:
        from a2a.tasks import process

        try:
            if countdown and countdown > 0:
                process.apply_async((str(task_id),), countdown=countdown)
            else:
                process.delay(str(task_id))
        except Exception:  # the row is the source of truth; the sweep will pick it up
            log.warning(
                "could not queue a2a.process for %s; the sweep will", task_id, exc_info=True
            )

    transaction.on_commit(send)


def record_message(task: Task, direction: str, message: dict[str, Any]) -> TaskMessage | None:
    """Add ``message`` to the task's conversation once (keyed by its messageId)."""
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        digest = hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()
        message_id = f"sha256:{digest[:40]}"
    message_id = message_id[:200]
    if TaskMessage.objects.filter(task=task, direction=direction, message_id=message_id).exists():
        return None
    return TaskMessage.objects.create(
        task=task, direction=direction, message_id=message_id, message=message
    )


def _user_id(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


# --- creation -----------------------------------------------------------------------


def _check_input(skill: Skill, data: Any) -> None:
    if not isinstance(data, dict):
        raise InputInvalid(
            "input must be a JSON object.",
            {"errors": [{"path": "(root)", "message": "input must be a JSON object"}]},
        )
    errors = schema_errors(skill.input_schema or {}, data)
    if errors:
        first = errors[0]
        raise InputInvalid(
            f"input does not match the input_schema of skill '{skill.id}': "
            f"{first['path']}: {first['message']}",
            {"errors": errors},
        )


def _choose_agent(skill: Skill, agent_id: str | None) -> tuple[AgentProfile, dict[str, Any]]:
    if agent_id is None or agent_id == "":
        return match_agent(skill)
    agent = AgentProfile.objects.filter(pk=agent_id).first()
    if agent is None:
        raise UnknownAgent(f"Unknown agent '{agent_id}'.", {"agentId": agent_id})
    if not agent.is_active:
        raise UnknownAgent(
            f"Agent '{agent_id}' is {agent.status}, not active.", {"agentId": agent_id}
        )
    if not agent.skills.filter(pk=skill.pk).exists():
        raise UnknownAgent(
            f"Agent '{agent_id}' does not offer the skill '{skill.id}'.",
            {"agentId": agent_id, "skillId": skill.id},
        )
    return agent, {"agentId": agent.id, "chosenBy": "caller", "at": timezone.now().isoformat()}


def _existing(user: Any, agent_caller: Any, key: str) -> Task | None:
    if not key:
        return None
    if agent_caller is not None:
        return Task.objects.filter(created_by_agent=agent_caller, idempotency_key=key).first()
    if _user_id(user) is not None:
        return Task.objects.filter(created_by=user, idempotency_key=key).first()
    return None


def _same_request(task: Task, skill_id: str, data: Any, agent_id: str | None) -> Task:
    """An idempotent repeat must ask for the same thing; else 409 (the key was reused)."""
    if task.skill_id != skill_id or (data is not None and task.input != data):
        raise Conflict(
            "This idempotencyKey was already used for a different task "
            f"({task.id}, skill '{task.skill_id}'). Use a new key for a new task.",
            {"taskId": str(task.id)},
            code="idempotency_conflict",
        )
    if agent_id and task.agent_id != agent_id:
        raise Conflict(
            f"This idempotencyKey was already used for a task sent to agent '{task.agent_id}'.",
            {"taskId": str(task.id)},
            code="idempotency_conflict",
        )
    task.created = False  # type: ignore[attr-defined]
    return task


def create_task(
    *,
    skill_id: str,
    input: dict[str, Any] | None,
    agent_id: str | None = None,
    user: Any = None,
    agent_caller: AgentProfile | None = None,
    idempotency_key: str = "",
    message: dict[str, Any] | None = None,
    context_id: str | None = None,
    origin: str = "api",
    validate_input: bool = True,
) -> Task:
    """Validate, choose an agent, store the task (SUBMITTED, next action SEND) and queue it.

    Returns the task; ``task.created`` is False when ``idempotency_key`` matched an earlier
    task of the same caller (that task is returned unchanged). Raises a 400 error for an
    unknown/inactive skill or agent, input failing the skill's ``input_schema`` or no
    agent for the skill, and 409 when the key was used for a different request.
    """
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None or not skill.is_active:
        state = "inactive" if skill is not None else "unknown"
        raise UnknownSkill(f"Skill '{skill_id}' is {state}.", {"skillId": skill_id})
    data = {} if input is None else input
    if validate_input:
        _check_input(skill, data)
    key = (idempotency_key or "")[:200]
    existing = _existing(user, agent_caller, key)
    if existing is not None:
        return _same_request(existing, skill.id, input, agent_id)
    agent, match = _choose_agent(skill, agent_id)
    context = context_id or (message or {}).get("contextId") or str(uuid.uuid4())
    if message is not None:
        outbound = relay_message(message)
    else:
        outbound = user_message(skill_id=skill.id, data=data)
    now = timezone.now()
    task = Task(
        skill=skill,
        agent=agent,
        context_id=str(context)[:200],
        input=data,
        transport=Transport.A2A,
        outbound_message=outbound,
        metadata={"match": match, "fallbacks": []},
        created_by=_user_id(user),
        created_by_agent=agent_caller,
        origin=origin,
        idempotency_key=key,
        next_action=NextAction.SEND,
        next_poll_at=now,
        deadline_at=_deadline(),
        created_at=now,
        state_changed_at=now,
    )
    try:
        with transaction.atomic():
            task.save(force_insert=True)
            TaskEvent.objects.create(
                task=task, at=now, from_state="", to_state=task.state, reason=f"created ({origin})"
            )
            TaskMessage.objects.create(
                task=task,
                direction=Direction.TO_AGENT,
                message_id=str(outbound.get("messageId", ""))[:200],
                message=outbound,
            )
            queue_processing(task.pk)
            transaction.on_commit(lambda: task_changed.send(Task, task_id=task.pk))
    except IntegrityError:
        # A concurrent request with the same idempotency key won the race.
        existing = _existing(user, agent_caller, key)
        if existing is None:
            raise
        return _same_request(existing, skill.id, input, agent_id)
    task.created = True  # type: ignore[attr-defined]
    return task


# --- the one mapping from an agent's status to our state machine ---------------------


def _remote_fields(task: Task, remote: dict[str, Any] | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if not isinstance(remote, dict):
        return fields
    rid, rctx = remote.get("id"), remote.get("contextId")
    if isinstance(rid, str) and rid and rid != task.remote_task_id:
        fields["remote_task_id"] = rid[:200]
    if isinstance(rctx, str) and rctx and rctx != task.remote_context_id:
        fields["remote_context_id"] = rctx[:200]
    return fields


def apply_agent_update(
    task: Task,
    *,
    status: dict[str, Any],
    artifacts: list[Any] | None = None,
    remote: dict[str, Any] | None = None,
    via: str,
) -> Task:
    """Apply an agent's A2A TaskStatus (+ artifacts) to ``task``.

    WORKING/SUBMITTED → keep following; INPUT_REQUIRED/AUTH_REQUIRED → the question is
    stored and polling pauses; COMPLETED → the artifacts' data is validated against the
    skill's ``output_schema`` (valid → COMPLETED with ``output``; invalid → FAILED
    ``output_invalid`` with the errors); FAILED/REJECTED/CANCELED → the matching verb.
    News about a task that already ended is recorded (conversation, remote ids) and
    otherwise ignored. Raises :class:`A2AProtocolError` for a status we cannot read.
    """
    if not isinstance(status, dict):
        raise A2AProtocolError("The agent's task status is not an object.")
    state = normalize_state(status.get("state"))
    if state is None:
        raise A2AProtocolError(f"The agent sent an unknown task state {status.get('state')!r}.")
    message = status.get("message") if isinstance(status.get("message"), dict) else None
    fields = _remote_fields(task, remote)
    if message is not None:
        record_message(task, Direction.FROM_AGENT, message)
        fields["status_message"] = message
    if isinstance(artifacts, list) and artifacts:
        fields["artifacts"] = artifacts
    if task.is_terminal:
        _update(task, fields)
        return task
    if not _move(task, state, message, artifacts, fields, f"via {via}"):
        # Someone moved the task first (a person's cancel, say): the state stays theirs,
        # but what the agent told us (its task id above all) is kept.
        _update(task, fields)
    return task


def _move(
    task: Task,
    state: str,
    message: dict[str, Any] | None,
    artifacts: list[Any] | None,
    fields: dict[str, Any],
    via_text: str,
) -> bool:
    """The transition for the agent's ``state``; False when a concurrent change won."""
    if state in ACTIVE_STATES:
        if (state == TaskState.WORKING and task.state != TaskState.WORKING) or (
            task.state in INTERRUPTED_STATES
        ):
            return task.start_work(f"agent reports {state} {via_text}", **fields)
    elif state in INTERRUPTED_STATES:
        if task.state != state:
            auth = state == TaskState.AUTH_REQUIRED
            return task.require_input(message, auth=auth, **fields)
    elif state == TaskState.COMPLETED:
        return _complete(task, artifacts or [], fields, via_text)
    elif state == TaskState.FAILED:
        text = message_text(message) or "The agent reported the task as failed."
        return task.fail("agent_failed", f"Agent '{task.agent_id}': {text}", **fields)
    elif state == TaskState.REJECTED:
        text = message_text(message) or "The agent rejected the task."
        return task.reject(f"Agent '{task.agent_id}': {text}", **fields)
    elif state == TaskState.CANCELED:
        return task.cancel(f"the agent canceled the task {via_text}", **fields)
    _update(task, fields)  # same state as ours: only news
    return True


def _update(task: Task, fields: dict[str, Any]) -> None:
    """Store non-state fields (remote ids, latest status message) without a transition."""
    if not fields:
        return
    Task.objects.filter(pk=task.pk).update(updated_at=timezone.now(), **fields)
    for name, value in fields.items():
        setattr(task, name, value)


def _complete(task: Task, artifacts: list[Any], fields: dict[str, Any], via_text: str) -> bool:
    output = collect_output(artifacts)
    errors = schema_errors(task.skill.output_schema or {}, output)
    fields = {**fields, "artifacts": artifacts}
    if errors:
        first = errors[0]
        return task.fail(
            "output_invalid",
            f"Agent '{task.agent_id}' completed, but its output does not match the "
            f"output_schema of skill '{task.skill_id}': {first['path']}: {first['message']}",
            {"errors": errors, "output": output},
            **fields,
        )
    fields.pop("artifacts")
    return task.transition(
        TaskState.COMPLETED,
        f"agent completed {via_text}; output valid",
        output=output,
        artifacts=artifacts,
        question=None,
        error=None,
        **fields,
    )


# --- people acting on tasks -----------------------------------------------------------


def reply_to_task(
    task: Task,
    *,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    message: dict[str, Any] | None = None,
    by: Any = None,
) -> Task:
    """Answer the agent's question: a new message on the same task and context.

    Only for a task in INPUT_REQUIRED / AUTH_REQUIRED (else 409). The task goes back to
    WORKING and the answer is delivered by :func:`deliver_followup`; polling resumes.
    """
    if task.state not in INTERRUPTED_STATES:
        raise InvalidTransition(
            f"Task {task.id} is {task.state}; only a task waiting for input "
            "(TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED) takes a reply."
        )
    if message is None and not text and data is None:
        raise ValidationFailed("A reply needs text or data.", {"fields": ["text", "data"]})
    if message is not None:
        outbound = relay_message(
            message, task_id=task.remote_task_id, context_id=task.remote_context_id
        )
    else:
        outbound = user_message(
            skill_id=task.skill_id,
            data=data,
            text=text,
            task_id=task.remote_task_id,
            context_id=task.remote_context_id,
        )
    who = getattr(by, "username", None) or str(by or "a person")
    with transaction.atomic():
        moved = task.transition(
            TaskState.WORKING,
            f"{who} replied",
            question=None,
            deadline_at=_deadline(),
            poll_interval=0.0,
        )
        if not moved:
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        record_message(task, Direction.TO_AGENT, outbound)
        deliver_followup(task, "reply", outbound)
    return task


def cancel_task(task: Task, *, by: Any = None, reason: str = "") -> Task:
    """Cancel a task that has not finished (else 409) and tell the agent."""
    if task.is_terminal:
        raise InvalidTransition(
            f"Task {task.id} is {task.state}, a final state; it cannot be canceled."
        )
    who = getattr(by, "username", None) or str(by or "a person")
    with transaction.atomic():
        if not task.cancel(reason or f"canceled by {who}"):
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        if task.remote_task_id or task.transport != Transport.A2A:
            deliver_followup(task, "cancel", None)
    return task


def retry_task(task: Task, *, by: Any = None) -> Task:
    """A person's retry of a FAILED or REJECTED task (else 409): a fresh attempt.

    Same agent, a new message (new messageId) without the agent's old task id; output,
    artifacts, error and question are cleared and the deadline starts again.
    """
    who = getattr(by, "username", None) or str(by or "a person")
    outbound = user_message(
        skill_id=task.skill_id, data=task.input, context_id=task.remote_context_id
    )
    first = task.messages.filter(direction=Direction.TO_AGENT).order_by("created_at", "id")
    original = first.values_list("message", flat=True).first()
    if task.origin != "api" and isinstance(original, dict):
        # A caller's own message (the A2A face): the same content, as a new message.
        outbound = relay_message(original, context_id=task.remote_context_id)
        outbound["messageId"] = str(uuid.uuid4())
    metadata = dict(task.metadata or {})
    metadata["retries"] = [
        *metadata.get("retries", []),
        {"at": timezone.now().isoformat(), "by": who, "previousError": task.error},
    ]
    metadata["sendFailures"] = 0
    with transaction.atomic():
        moved = task.resubmit(
            f"retried by {who}",
            outbound_message=outbound,
            remote_task_id="",
            output=None,
            artifacts=[],
            error=None,
            question=None,
            status_message=None,
            transport=Transport.A2A,
            metadata=metadata,
            next_action=NextAction.SEND,
            next_poll_at=timezone.now(),
            lease_until=None,
            poll_interval=0.0,
            deadline_at=_deadline(),
        )
        if not moved:
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        record_message(task, Direction.TO_AGENT, outbound)
        queue_processing(task.pk)
    return task


# --- seams ------------------------------------------------------------------------------


def deliver_followup(task: Task, kind: str, message: dict[str, Any] | None) -> None:
    """Send a follow-up (``kind`` "reply" with ``message``, or "cancel") to the agent.

    Over A2A the worker does it: the row gets next action SEND (the message becomes the
    outbound message) or CANCEL, and a worker is asked to act now.
    """
    if task.transport != Transport.A2A:
        from gateway.services import send_followup

        send_followup(task, "message" if kind == "reply" else kind, message)
        return
    fields: dict[str, Any] = {}
    if kind == "reply":
        fields["outbound_message"] = message
        action = NextAction.SEND
    elif kind == "cancel":
        if not task.remote_task_id:
            return  # the agent never got it; nothing to cancel there
        action = NextAction.CANCEL
    else:
        raise ValueError(f"unknown follow-up kind {kind!r}")
    task.schedule(action, 0.0, **fields)
    queue_processing(task.pk)


def handle_send_failure(task: Task, error: A2ACallError) -> Task:
    """A send to the agent failed: retry over HTTP, fall back to the gateway, or fail.

    Transient errors (connection, timeout, 5xx, 429) are retried after
    ``A2A_RETRY_BACKOFF * 2^(n-1)`` seconds (or the agent's ``Retry-After`` when longer)
    while fewer than ``max_attempts`` sends of this message failed and the deadline
    allows; then the task goes to the gateway (``gateway.fallback``), as it does at once
    for 4xx, for agents without an endpoint and for agents online on the socket. A 2xx
    answer that is not A2A fails the task (the agent may have acted on it).
    """
    from gateway import fallback

    if fallback.now(task, error):
        return fallback.fall_back(task, error)
    metadata = dict(task.metadata or {})
    failures = int(metadata.get("sendFailures", 0)) + 1
    metadata["sendFailures"] = failures
    limit = max_attempts(task)
    err = error.as_error()
    if error.transient and failures < limit:
        delay = max(error.retry_after or 0.0, settings.A2A_RETRY_BACKOFF * 2 ** (failures - 1))
        due = timezone.now() + timedelta(seconds=delay)
        if task.deadline_at is None or due < task.deadline_at:
            updated = Task.objects.filter(pk=task.pk, state=task.state).update(
                error=err,
                metadata=metadata,
                next_action=NextAction.SEND,
                next_poll_at=due,
                lease_until=None,
                updated_at=timezone.now(),
            )
            if updated:
                task.error, task.metadata, task.next_poll_at = err, metadata, due
                if delay < settings.A2A_SWEEP_INTERVAL:
                    queue_processing(task.pk, countdown=delay)
            return task
    if fallback.applies(error):
        # HTTP retries are used up (or the deadline is near): the gateway takes over.
        Task.objects.filter(pk=task.pk).update(metadata=metadata, error=None)
        task.metadata, task.error = metadata, None
        return fallback.fall_back(task, error)
    message = f"Agent '{task.agent_id}' did not accept the task: {error.message}"
    task.fail(error.code, message, err["details"], metadata=metadata)
    return task
