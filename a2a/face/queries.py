"""The face's two hottest reads, as plain SQL.

``GET /tasks/{id}`` is the most frequent A2A call (clients poll it). Building the same two
ORM querysets on every request costs more CPU than running them, so these are written
once as SQL over the models' own table and column names and loaded with ``raw()``; every
other query stays in the ORM.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import connection

from a2a.face.context import CallContext
from a2a.models import Task, TaskMessage


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@cache
def _task_sql(owner: str, tenant: bool) -> str:
    meta = Task._meta
    where = [f"{_q(meta.pk.column)} = %s"]
    if owner == "user":
        where.append(f"{_q(meta.get_field('created_by').column)} = %s")
    elif owner == "agent":
        where.append(f"{_q(meta.get_field('created_by_agent').column)} = %s")
    else:
        where.append(f"{_q(meta.get_field('created_by').column)} IS NULL")
        where.append(f"{_q(meta.get_field('created_by_agent').column)} IS NULL")
    if tenant:
        where.append(f"{_q(meta.get_field('agent').column)} = %s")
    return f"SELECT * FROM {_q(meta.db_table)} WHERE {' AND '.join(where)}"


def visible_task(ctx: CallContext, task_id: uuid.UUID) -> Task | None:
    """The task ``task_id`` if this caller may see it (on this tenant route), else None."""
    params: list[Any] = [Task._meta.pk.get_db_prep_value(task_id, connection)]
    if ctx.agent_caller is not None:
        owner = "agent"
        params.append(ctx.agent_caller.pk)
    elif ctx.user is not None:
        owner = "user"
        params.append(ctx.user.pk)
    else:
        owner = "anonymous"
    if ctx.tenant:
        params.append(ctx.tenant)
    rows = list(Task.objects.raw(_task_sql(owner, bool(ctx.tenant)), params))
    return rows[0] if rows else None


@cache
def _history_sql() -> str:
    meta = TaskMessage._meta
    task_col = _q(meta.get_field("task").column)
    order = f"{_q(meta.get_field('created_at').column)}, {_q(meta.pk.column)}"
    return f"SELECT * FROM {_q(meta.db_table)} WHERE {task_col} = %s ORDER BY {order}"


def history(task: Task) -> list[TaskMessage]:
    """The task's conversation, oldest first."""
    param = Task._meta.pk.get_db_prep_value(task.pk, connection)
    return list(TaskMessage.objects.raw(_history_sql(), [param]))
