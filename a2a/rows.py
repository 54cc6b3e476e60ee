"""The task reads of the hot paths, compiled once (:mod:`platform_site.compiled`).

A worker reads each task it claims with its agent and skill (one joined statement, compiled
once: the ORM's ``select_related`` join is compiled anew each time, for more CPU than it
takes to run), and the push webhook reads the task of every push.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.models import Task
from platform_site.compiled import CompiledGet

TASKS: CompiledGet[Task] = CompiledGet(Task)
TASKS_FOR_WORK: CompiledGet[Task] = CompiledGet(Task, related=("agent", "skill"))


def task(task_id: uuid.UUID | str, *, lock: bool = False) -> Task | None:
    """The task row alone (its agent and skill are read when first used)."""
    return TASKS.get(task_id, lock=lock)


def task_for_work(task_id: Any) -> Task | None:
    """The task with its agent and skill, as a worker needs it. Both are as they were at
    the claim: a stream or a held send outlives that read, so what must follow an edit
    made meanwhile reads the registry again (the output schema a COMPLETED is judged by:
    ``a2a.agent_updates._output_schema``)."""
    return TASKS_FOR_WORK.get(task_id)
