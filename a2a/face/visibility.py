"""Which tasks a caller may see, a task as the caller sees it, and which agents a tenant
route serves.

A caller sees only the tasks it created (a user, an agent calling with its key, or the
anonymous callers together); a tenant route further restricts to that agent's tasks.
Anything else is ``TASK_NOT_FOUND``, so ids of others' tasks are not revealed.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from a2a.face import queries
from a2a.face.context import CallContext
from a2a.face.errors import AgentNotFound, TaskNotFound
from a2a.face.serializers import task_json
from a2a.models import Task
from agent_profiles.models import AgentProfile, AgentStatus


def task_id(raw: Any) -> uuid.UUID:
    """``raw`` as a task id; anything that cannot name a task is TASK_NOT_FOUND."""
    try:
        return uuid.UUID(str(raw))
    except (TypeError, ValueError):
        shown = str(raw)[:100]
        raise TaskNotFound(f"Task {shown!r} not found.", metadata={"taskId": shown}) from None


def visible_tasks(ctx: CallContext) -> QuerySet[Task]:
    qs = Task.objects.filter(ctx.owner_q())
    if ctx.tenant:
        qs = qs.filter(agent_id=ctx.tenant)
    return qs


def visible_task(ctx: CallContext, raw_id: Any) -> Task:
    """The task ``raw_id`` if this caller may see it, else TASK_NOT_FOUND."""
    wanted = task_id(raw_id)
    task = queries.visible_task(ctx, wanted)
    if task is None:
        raise TaskNotFound(f"Task {wanted} not found.", metadata={"taskId": str(wanted)})
    return task


def task_payload(
    task: Task, *, history_length: int | None, include_artifacts: bool = True
) -> dict[str, Any]:
    """The A2A Task of ``task`` with its history trimmed to ``history_length``."""
    history = queries.history(task, history_length) if history_length != 0 else None
    return task_json(
        task, history=history, history_length=history_length, include_artifacts=include_artifacts
    )


def known_tenant(agent_id: str) -> None:
    """AGENT_NOT_FOUND for a tenant route that names no agent at all: listing its tasks
    answered an empty page, as if the agent were there. A disabled agent's route still
    lists the caller's tasks there."""
    if not AgentProfile.objects.filter(pk=agent_id).exists():
        raise AgentNotFound(f"No agent {agent_id!r}.", metadata={"agentId": agent_id})


def tenant_agent(agent_id: str) -> AgentProfile:
    """The agent of the tenant route ``/v1/a2a/{agentId}``; AGENT_NOT_FOUND for an unknown,
    disabled or pending one (its card is gone, as on ``/api/a2a/agent-card/{id}``: a
    pending agent's name and description are a stranger's until staff approve them)."""
    agent = AgentProfile.objects.filter(pk=agent_id, status=AgentStatus.ACTIVE).first()
    if agent is None:
        raise AgentNotFound(f"No agent {agent_id!r}.", metadata={"agentId": agent_id})
    return agent
