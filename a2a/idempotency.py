"""Idempotency keys: a caller's repeat of a creation gets the task its first request made.

A key belongs to its caller (a user, or an agent calling the face) and names one request:
a repeat must ask for the same skill, input and agent, or it is refused ``409
idempotency_conflict``. Used by :mod:`a2a.creation` and :mod:`a2a.batch`.
"""

from __future__ import annotations

from typing import Any

from a2a.models import Task
from platform_site.errors import Conflict


def signed_in(user: Any) -> Any:
    """The user a task is created by: None for an anonymous caller."""
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def caller_tasks(user: Any, agent_caller: Any) -> Any:
    """The tasks whose idempotency keys the caller owns (None for an anonymous caller)."""
    if agent_caller is not None:
        return Task.objects.filter(created_by_agent=agent_caller)
    if signed_in(user) is not None:
        return Task.objects.filter(created_by=user)
    return None


def existing_task(user: Any, agent_caller: Any, key: str) -> Task | None:
    """The caller's task made with ``key`` (none without a key or a caller)."""
    tasks = caller_tasks(user, agent_caller) if key else None
    return tasks.filter(idempotency_key=key).first() if tasks is not None else None


def same_request(task: Task, skill_id: str, data: Any, agent_id: str | None) -> Task:
    """An idempotent repeat must ask for the same thing; else 409 (the key was reused).

    Returns ``task`` marked ``created = False``.
    """
    check_same(task, skill_id, data, agent_id)
    task.created = False  # type: ignore[attr-defined]
    return task


def check_same(task: Task, skill_id: str, data: Any, agent_id: str | None) -> None:
    """409 ``idempotency_conflict`` unless the repeat asks for what ``task`` was made for."""
    if task.skill_id != skill_id or (data is not None and task.input != data):
        raise Conflict(
            "This idempotencyKey was already used for a different task "
            f"({task.id}, skill '{task.skill_id}'). Use a new key for a new task.",
            {"taskId": str(task.id)},
            code="idempotency_conflict",
        )
    first = first_agent(task)
    if agent_id and first != agent_id:
        since = "" if first == task.agent_id else f" (reassigned since to '{task.agent_id}')"
        raise Conflict(
            f"This idempotencyKey was already used for a task sent to agent '{first}'{since}.",
            {"taskId": str(task.id)},
            code="idempotency_conflict",
        )


def first_agent(task: Task) -> str:
    """The agent ``task`` was created for (a caller naming its agent got exactly that one):
    a repeat is compared with it, not with where a person moved the task since; each move
    is in ``metadata.reassignments``, the first one's ``from`` is that agent."""
    moves = (task.metadata or {}).get("reassignments")
    if isinstance(moves, list) and moves and isinstance(moves[0], dict):
        origin = moves[0].get("from")
        if isinstance(origin, str) and origin:
            return origin
    return str(task.agent_id)
