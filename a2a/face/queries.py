"""The face's two hottest reads, compiled once (:mod:`platform_site.compiled`).

``GET /tasks/{id}`` is the most frequent A2A call (clients poll it). It reads the task by
its id (the compiled read the workers use) and checks in Python that this caller may see
it, then reads its conversation with one compiled statement. Loading them with ``raw()``,
as before, worked out the columns' converters anew on every request: half of a
read's CPU. Every other query stays in the ORM.
"""

from __future__ import annotations

import uuid

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from a2a import rows
from a2a.face.context import CallContext
from a2a.models import Direction, Task, TaskMessage
from platform_site.compiled import CompiledGet

MESSAGES: CompiledGet[TaskMessage] = CompiledGet(TaskMessage, "task", order_by=("created_at", "pk"))


def visible_task(ctx: CallContext, task_id: uuid.UUID) -> Task | None:
    """The task ``task_id`` if this caller may see it (on this tenant route), else None."""
    task = rows.task(task_id)
    if task is None:
        return None
    if ctx.agent_caller is not None:
        mine = task.created_by_agent_id == ctx.agent_caller.pk
    elif ctx.user is not None:
        mine = task.created_by_id == ctx.user.pk
    else:
        mine = task.anonymous
    if not mine or (ctx.tenant and task.agent_id != ctx.tenant):
        return None
    return task


def history(task: Task, last: int | None = None) -> list[TaskMessage]:
    """The task's conversation, oldest first: all of it, or its ``last`` messages, read
    from the end (a client asking for the latest message of a conversation of a thousand
    read all thousand of them)."""
    if last is None:
        return MESSAGES.all(task.pk)
    if last <= 0:
        return []
    newest = list(TaskMessage.objects.filter(task=task).order_by("-created_at", "-pk")[:last])
    newest.reverse()
    return newest


def last_from_agent(task: Task) -> TaskMessage | None:
    """The agent's latest message on ``task``, if it sent any."""
    mine = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT)
    return mine.order_by("-created_at", "-pk").first()


def histories(task_ids: list[uuid.UUID], last: int) -> dict[uuid.UUID, list[TaskMessage]]:
    """The last ``last`` messages (oldest first) of each of ``task_ids`` that has any, in
    one statement that ranks each task's messages from the newest and keeps the first."""
    if last <= 0 or not task_ids:
        return {}
    newest_first = [F("created_at").desc(), F("pk").desc()]
    ranked = TaskMessage.objects.filter(task_id__in=task_ids).annotate(
        place=Window(RowNumber(), partition_by=[F("task_id")], order_by=newest_first)
    )
    out: dict[uuid.UUID, list[TaskMessage]] = {}
    for message in ranked.filter(place__lte=last).order_by("created_at", "pk"):
        out.setdefault(message.task_id, []).append(message)
    return out
