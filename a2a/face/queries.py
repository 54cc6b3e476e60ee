"""The face's two hottest reads, compiled once (:mod:`platform_site.compiled`).

``GET /tasks/{id}`` is the most frequent A2A call (clients poll it). It reads the task by
its id (the compiled read the workers use) and checks in Python that this caller may see
it, then reads its conversation with one compiled statement. Loading them with ``raw()``,
as before, worked out the columns' converters anew on every request: half of a
read's CPU. Every other query stays in the ORM.
"""

from __future__ import annotations

import uuid

from a2a import rows
from a2a.face.context import CallContext
from a2a.models import Task, TaskMessage
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


def history(task: Task) -> list[TaskMessage]:
    """The task's conversation, oldest first."""
    return MESSAGES.all(task.pk)
