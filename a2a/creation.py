"""Creating platform tasks: validation, choosing the agent, idempotency keys and queueing.

Part of :mod:`a2a.services` (import from there): :func:`create_task` stores a task in
SUBMITTED with next action SEND, and :func:`queue_processing` asks a worker to act on it.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from a2a.exceptions import InputInvalid, UnknownAgent, UnknownSkill
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.signals import task_changed
from a2a.states import NextAction, Transport
from a2a.wire import relay_message, schema_errors, user_message
from agent_profiles.matching import match_agent
from agent_profiles.models import AgentProfile, Skill
from platform_site.errors import Conflict

log = logging.getLogger(__name__)


# --- helpers ------------------------------------------------------------------------


def _deadline() -> Any:
    return timezone.now() + timedelta(seconds=settings.A2A_TASK_TIMEOUT)


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
