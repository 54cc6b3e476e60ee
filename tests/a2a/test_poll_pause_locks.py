"""An agent's pause (``Retry-After``) and the engine's re-scheduled polls lock the same task
rows: in one order, never waiting for a row another worker holds, so PostgreSQL never
kills one of them as a deadlock; and a pause that fails anyway charges no task with an
internal error (it is the agent's, not the task's)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import creation, engine, scheduling
from a2a.exceptions import A2ATransientError
from a2a.models import Task
from a2a.states import NextAction, TaskState

pytestmark = pytest.mark.django_db(transaction=True)


def polling(n: int, make_skill: Any, make_agent: Any, make_user: Any) -> list[Task]:
    """``n`` WORKING tasks of agent-one whose polls are due, held by a batch's lease."""
    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()
    tasks = [
        creation.create_task(skill_id=skill.id, input={"product": f"p{i}"}, user=user)
        for i in range(n)
    ]
    return tasks


@pytest.mark.postgres
def test_a_pause_and_a_batchs_rescheduled_polls_do_not_deadlock(
    make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = polling(10, make_skill, make_agent, make_user)
    now = timezone.now()
    lease = now + timedelta(seconds=30)
    Task.objects.update(
        state=TaskState.WORKING,
        next_action=NextAction.POLL,
        attempts=1,
        next_poll_at=now - timedelta(seconds=1),
        lease_until=lease,
    )
    batch = [Task.objects.get(pk=t.pk) for t in tasks]
    batch.sort(key=lambda t: t.created_at, reverse=True)  # a batch's order, not the key's
    first_written = threading.Event()
    real = scheduling.update_rows

    def update_rows(model: Any, updates: list[Any]) -> Any:
        # The same statements, the first row's a moment before the rest (as a busy server
        # interleaves them): the other worker's pause comes in between.
        done = real(model, updates[:1])
        first_written.set()
        time.sleep(0.5)
        return done + real(model, updates[1:])

    monkeypatch.setattr(scheduling, "update_rows", update_rows)
    errors: dict[str, Exception] = {}
    paused: list[int] = []

    def reschedule() -> None:
        try:
            Task.poll_later([(t, now + timedelta(seconds=1), 1.0) for t in batch], lease)
        except OperationalError as exc:
            errors["poll_later"] = exc
        finally:
            connections.close_all()

    def pause() -> None:
        first_written.wait(10)
        try:
            paused.append(Task.pause_polls("agent-one", timezone.now() + timedelta(seconds=5)))
        except OperationalError as exc:
            errors["pause_polls"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reschedule), threading.Thread(target=pause)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == {}
    # The row the batch held locked was passed over; the others were paused.
    assert paused
    assert paused[0] < len(tasks)


def test_a_pause_moves_every_poll_of_the_agent_due_before_it(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    tasks = polling(3, make_skill, make_agent, make_user)
    now = timezone.now()
    until = now + timedelta(seconds=30)
    Task.objects.update(
        state=TaskState.WORKING, next_action=NextAction.POLL, next_poll_at=now, attempts=1
    )
    Task.objects.filter(pk=tasks[0].pk).update(next_poll_at=until + timedelta(seconds=5))
    assert Task.pause_polls("agent-one", until) == 2
    due = sorted(Task.objects.values_list("next_poll_at", flat=True))
    assert due == [until, until, until + timedelta(seconds=5)]


@pytest.mark.postgres
def test_a_pause_is_one_statement_whatever_the_number_of_polls(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    # The locked ids were read, then sent back one parameter each: past 65,535 due polls
    # PostgreSQL refused the statement, and the agent was not paused at all.
    polling(3, make_skill, make_agent, make_user)
    Task.objects.update(
        state=TaskState.WORKING, next_action=NextAction.POLL, next_poll_at=timezone.now()
    )
    with CaptureQueriesContext(connection) as queries:
        assert Task.pause_polls("agent-one", timezone.now() + timedelta(seconds=30)) == 3
    statements = [q["sql"] for q in queries.captured_queries if "a2a_task" in q["sql"]]
    assert len(statements) == 1
    assert "SKIP LOCKED" in statements[0]


def test_a_pause_that_fails_charges_no_task(
    make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = polling(1, make_skill, make_agent, make_user)[0]
    Task.objects.update(
        state=TaskState.WORKING, next_action=NextAction.POLL, attempts=1, remote_task_id="r-1"
    )
    task.refresh_from_db()

    def deadlocked(agent_id: str, until: Any) -> int:
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(Task, "pause_polls", deadlocked)
    from a2a.agent_registry import target_for
    from agent_profiles.models import AgentProfile

    target = target_for(AgentProfile.objects.get(pk="agent-one"))
    error = A2ATransientError("the agent is busy", status=429, retry_after=5.0)
    engine._apply_one(engine.Polled(task, target, error=error))  # raised before
    task.refresh_from_db()
    assert "internalErrors" not in (task.metadata or {})
    assert task.state == TaskState.WORKING
