"""Creating many platform tasks at once (the service behind ``POST /api/tasks:batch``).

Each request gets the outcome ``POST /api/tasks`` would give it, in the order given: a new
task (``created``), the earlier task when its ``idempotencyKey`` repeats one of the
caller's or an earlier request's of the same batch, or the domain error. A refused
request writes nothing; the others are created anyway.

The work is shared across the batch: one read of the caller's earlier idempotency keys,
the candidates' load per skill for matching, from the per-process count a single creation
uses too (counted at most once per ``A2A_LOAD_CACHE_SECONDS``: a stream of small batches
must not count every active task per request; the batch's own picks are counted in, so
the load spreads over the candidates), one INSERT per row kind for all new tasks and
one Celery message to start them. If a concurrent request takes one of the keys
meanwhile (the INSERT fails on the unique constraint, or PostgreSQL ends a deadlock
between two batches sharing keys by rolling this one back), or another process deleted
an agent or skill this one still had cached (it breaks a foreign key), nothing of the
batch was written and the requests are created one by one instead, each with the single-task
rules (:func:`a2a.creation.create_task` chooses again after a deleted agent). Each one's
error is its own result there, whatever it is: the requests before it were committed, so
the batch must not fail as a whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, OperationalError, transaction

from a2a import lookups
from a2a.agent_choice import choose_agent
from a2a.creation import (
    NewTask,
    active_skill,
    build,
    check_input,
    create_task,
    foreign_key_violation,
    insert,
)
from a2a.idempotency import caller_tasks, check_same
from a2a.models import Task
from agent_profiles.models import Skill
from platform_site.errors import PlatformError, outage_error

log = logging.getLogger(__name__)


class ItemFailed(PlatformError):
    """A batch item that failed on the platform's side (500 for that item alone)."""

    code = "internal_error"
    status_code = 500


@dataclass
class TaskRequest:
    """One task to create: the fields of the ``POST /api/tasks`` body."""

    skill_id: str
    input: dict[str, Any] = field(default_factory=dict)
    agent_id: str | None = None
    idempotency_key: str = ""


@dataclass
class Outcome:
    """What became of one request: the task (``created`` or an earlier one) or the error."""

    task: Task | None = None
    created: bool = False
    error: PlatformError | None = None


@dataclass
class _Item:
    request: TaskRequest
    outcome: Outcome = field(default_factory=Outcome)
    new: NewTask | None = None
    repeat_of: _Item | None = None


def create_tasks(requests: list[TaskRequest], *, user: Any) -> list[Outcome]:
    """Create (or refuse) each request for ``user``; the outcomes in the same order."""
    items = [_Item(request) for request in requests]
    for item in items:
        item.request.idempotency_key = (item.request.idempotency_key or "")[:200]
    earlier = _earlier_tasks(user, {i.request.idempotency_key for i in items} - {""})
    claimed: dict[str, _Item] = {}
    active: dict[str, dict[str, int]] = {}
    for item in items:
        key = item.request.idempotency_key
        try:
            # Checked before the key, in create_task's order: a repeat naming an unknown
            # skill or bad input gets that 400, as the same POST /api/tasks would.
            skill = active_skill(item.request.skill_id)
            check_input(skill, item.request.input)
            if key in earlier:
                _check(earlier[key], item.request)
                item.outcome.task = earlier[key]
            elif key in claimed:
                item.repeat_of = claimed[key]
            else:
                item.new = _prepare(item.request, skill, user, active)
                if key:
                    claimed[key] = item
        except PlatformError as exc:
            item.outcome.error = exc
    fresh = [item for item in items if item.new is not None or item.repeat_of is not None]
    try:
        with transaction.atomic():
            insert([item.new for item in fresh if item.new is not None])
    except (IntegrityError, OperationalError) as exc:
        if isinstance(exc, OperationalError) and not lost_to_another(exc):
            raise  # the database is away: the 503 of the whole request, nothing written
        # A concurrent request took one of the keys (or a batch sharing keys deadlocked
        # with this one and PostgreSQL chose this one), or an agent was deleted elsewhere:
        # one by one, with the single rules (and, after a deletion, fresh registry data).
        if isinstance(exc, IntegrityError) and foreign_key_violation(exc):
            lookups.clear()
        for item in fresh:
            item.outcome = _create_one(item.request, user)
    else:
        for item in fresh:
            _settle(item)
    return [item.outcome for item in items]


def _check(task: Task, request: TaskRequest) -> None:
    check_same(task, request.skill_id, request.input, request.agent_id)


# PostgreSQL's "deadlock detected" and "serialization failure": the transaction lost to a
# concurrent one and was rolled back whole, so trying again is safe. Two batches sharing
# keys wait for each other's unique-index entries (the rows go in sorted by key, see
# a2a.creation.insert, but a single creation or a key taken in between may still cross).
_LOST_TO_ANOTHER = {"40P01", "40001"}


def lost_to_another(exc: OperationalError) -> bool:
    """Whether ``exc`` is a deadlock or serialization failure (rolled back, retryable),
    not the database being away."""
    return getattr(exc.__cause__, "sqlstate", None) in _LOST_TO_ANOTHER


def _earlier_tasks(user: Any, keys: set[str]) -> dict[str, Task]:
    tasks = caller_tasks(user, None) if keys else None
    if tasks is None:
        return {}
    return {task.idempotency_key: task for task in tasks.filter(idempotency_key__in=keys)}


def _prepare(
    request: TaskRequest, skill: Skill, user: Any, active: dict[str, dict[str, int]]
) -> NewTask:
    counts = None
    if not request.agent_id:
        if skill.pk not in active:  # the per-process count (a copy), as one creation's
            active[skill.pk] = lookups.load(lookups.candidates(skill))
        counts = active[skill.pk]
    agent, match = choose_agent(skill, request.agent_id, counts)
    if counts is not None:
        counts[agent.id] = counts.get(agent.id, 0) + 1
    return build(
        skill=skill,
        agent=agent,
        match=match,
        data=request.input,
        user=user,
        idempotency_key=request.idempotency_key,
    )


def _settle(item: _Item) -> None:
    if item.new is not None:
        item.outcome.task, item.outcome.created = item.new.task, True
        return
    first = item.repeat_of.new if item.repeat_of is not None else None
    if first is None:  # cannot happen: only created items are claimed
        raise RuntimeError("a repeated key without its first request")
    try:
        _check(first.task, item.request)
    except PlatformError as exc:
        item.outcome.error = exc
        return
    item.outcome.task = first.task


def _create_one(request: TaskRequest, user: Any) -> Outcome:
    try:
        task = create_task(
            skill_id=request.skill_id,
            input=request.input,
            agent_id=request.agent_id,
            user=user,
            idempotency_key=request.idempotency_key,
        )
    except PlatformError as exc:
        return Outcome(error=exc)
    except Exception as exc:  # the items before it are committed: answer for each
        log.exception("batch item for skill %s could not be created", request.skill_id)
        error = outage_error(exc) or ItemFailed("The platform failed to create this task.")
        return Outcome(error=error)
    return Outcome(task=task, created=bool(getattr(task, "created", True)))
