"""Writes combined into one PostgreSQL statement do what the transaction did: all rows or
none, the event only with the compare-and-set, the same values; they stay out of the way
where they cannot apply (SQLite, a new task inside a transaction), and a transition inside
a caller's transaction joins it."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import creation
from a2a.models import Task, TaskEvent, TaskMessage
from a2a.signals import task_changed
from a2a.states import TaskState
from platform_site import combined

pytestmark = pytest.mark.django_db(transaction=True)
postgres = pytest.mark.postgres


@pytest.fixture
def task(make_skill: Any, make_agent: Any) -> Task:
    skill = make_skill()
    return Task.objects.create(skill=skill, agent=make_agent(skills=[skill]))


def statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


@postgres
def test_a_transition_is_one_statement_with_its_event(task: Task) -> None:
    announced: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        announced.append(kwargs)

    task_changed.connect(receiver, dispatch_uid="test_combined")
    try:
        with CaptureQueriesContext(connection) as queries:
            assert task.start_work("the agent took it")
    finally:
        task_changed.disconnect(dispatch_uid="test_combined")
    # one write (the receivers of task_changed read after it: the push configs)
    writes = [sql for sql in statements(queries) if not sql.startswith("SELECT")]
    assert len(writes) == 1, writes
    assert writes[0].startswith("WITH changed AS (UPDATE")
    stored = Task.objects.get(pk=task.pk)
    assert stored.state == TaskState.WORKING
    event = TaskEvent.objects.get(task=task, to_state=TaskState.WORKING)
    assert (event.from_state, event.reason) == (TaskState.SUBMITTED, "the agent took it")
    assert event.at == stored.state_changed_at
    assert [a["state"] for a in announced] == [TaskState.WORKING]


@postgres
def test_a_lost_compare_and_set_writes_no_event(task: Task) -> None:
    stale = Task.objects.get(pk=task.pk)
    assert task.start_work("first")
    events = TaskEvent.objects.count()
    # ``stale`` still believes the task SUBMITTED: its move must not happen
    assert not stale.complete({"verdict": "pass"}, [])
    assert TaskEvent.objects.count() == events
    assert stale.state == TaskState.WORKING  # reloaded
    assert Task.objects.get(pk=task.pk).state == TaskState.WORKING


@postgres
def test_inside_a_transaction_the_transition_joins_it_in_one_statement(task: Task) -> None:
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        assert not combined.available()  # new tasks keep their savepoint
        assert combined.available(joining=True)
        assert task.start_work("in a transaction")
    sent = statements(queries)
    assert not any("SAVEPOINT" in sql for sql in sent), sent
    writes = [sql for sql in sent if not sql.startswith("SELECT")]
    assert len(writes) == 1, writes
    assert writes[0].startswith("WITH changed AS (UPDATE")
    assert Task.objects.get(pk=task.pk).state == TaskState.WORKING
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.WORKING).count() == 1


@postgres
def test_a_transition_that_fails_in_a_transaction_takes_the_transaction_with_it(
    task: Task,
) -> None:
    """Joined without a savepoint, all or nothing still holds: the caller's writes before
    a refused transition are undone with it."""

    def note_then_move() -> None:
        with transaction.atomic():
            task.note(error={"code": "before"})
            task.transition("x" * 300, "a state longer than the column")  # refused

    with pytest.raises(DataError):
        note_then_move()
    stored = Task.objects.get(pk=task.pk)
    assert stored.error is None
    assert stored.state == TaskState.SUBMITTED
    assert TaskEvent.objects.filter(task=task).count() == 0


@postgres
def test_a_new_task_is_one_statement(make_skill: Any, make_agent: Any, make_user: Any) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()
    creation.create_task(skill_id=skill.id, input={"product": "warm"}, user=user)  # caches
    with CaptureQueriesContext(connection) as queries:
        made = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
    writes = [sql for sql in statements(queries) if not sql.startswith("SELECT")]
    assert len(writes) == 1, writes
    assert writes[0].startswith("WITH row0 AS (INSERT INTO")
    assert Task.objects.get(pk=made.pk).input == {"product": "lamp"}
    assert TaskEvent.objects.filter(task=made, to_state=TaskState.SUBMITTED).count() == 1
    assert TaskMessage.objects.get(task=made).message == made.outbound_message


@postgres
def test_a_refused_row_leaves_none_of_the_others(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = make_skill()
    agent = make_agent(skills=[skill])
    user = make_user()
    first = creation.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k"
    )
    new = creation.build(
        skill=skill, agent=agent, match={}, data={"product": "x"}, user=user, idempotency_key="k"
    )
    with pytest.raises(IntegrityError):
        combined.insert_together([new.task, new.event, new.message])
    assert not Task.objects.filter(pk=new.task.pk).exists()
    assert not TaskEvent.objects.filter(task_id=new.task.pk).exists()
    assert not TaskMessage.objects.filter(task_id=new.task.pk).exists()
    # and create_task answers a repeated key with the first task, as before
    again = creation.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k"
    )
    assert again.pk == first.pk


def test_elsewhere_nothing_is_combined(task: Task) -> None:
    event = TaskEvent(task_id=task.pk, at=timezone.now(), from_state="", to_state="x")
    if connection.vendor == "postgresql":
        with transaction.atomic():
            assert combined.insert_together([event]) is False
            fields = {"state": TaskState.WORKING}
            assert (
                combined.update_then_insert(Task, task.pk, {}, fields, event, returning="watched")
                is None
            )
    else:
        assert combined.insert_together([event]) is False
        assert (
            combined.update_then_insert(
                Task, task.pk, {}, {"state": "x"}, event, returning="watched"
            )
            is None
        )
    assert not TaskEvent.objects.filter(task=task, to_state="x").exists()
    assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED


@postgres
def test_a_claim_and_its_read_are_one_statement(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())  # due
    with CaptureQueriesContext(connection) as queries:
        claimed = Task.claim(task.pk)
    assert len(statements(queries)) == 1, statements(queries)
    assert claimed is not None
    stored = Task.objects.select_related("agent", "skill").get(pk=task.pk)
    assert stored.lease_until is not None
    for field in Task._meta.concrete_fields:  # the lease too, set from the claim
        assert getattr(claimed, field.attname) == getattr(stored, field.attname), field.name
    assert (claimed.agent.pk, claimed.skill.pk) == (stored.agent.pk, stored.skill.pk)
    # held now: nobody else gets it, and nothing is read
    with CaptureQueriesContext(connection) as queries:
        assert Task.claim(task.pk) is None
    assert len(statements(queries)) == 1
    Task.objects.filter(pk=task.pk).update(lease_until=None, next_action="")
    assert Task.claim(task.pk) is None  # nothing due


def test_a_batch_of_claims_is_one_statement_on_postgresql(make_skill: Any, make_agent: Any) -> None:
    """Claims the due and free ones of its ids (with agent and skill, lease set), none
    held by another, none not due, no unknown one; one statement on PostgreSQL, a claim
    and a read per task elsewhere (SQLite)."""
    skill = make_skill()
    agent = make_agent(skills=[skill])
    now = timezone.now()
    due = [Task.objects.create(skill=skill, agent=agent, next_poll_at=now) for _ in range(3)]
    held = Task.objects.create(
        skill=skill, agent=agent, next_poll_at=now, lease_until=now + timedelta(minutes=1)
    )
    later = Task.objects.create(skill=skill, agent=agent, next_poll_at=now + timedelta(hours=1))
    ids = [*(t.pk for t in due), held.pk, later.pk, uuid.uuid4()]
    with CaptureQueriesContext(connection) as queries:
        claimed = Task.claim_many(ids)
    if connection.vendor == "postgresql":
        assert len(statements(queries)) == 1, statements(queries)
    assert sorted(t.pk for t in claimed) == sorted(t.pk for t in due)
    for task in claimed:
        stored = Task.objects.get(pk=task.pk)
        assert task.lease_until == stored.lease_until is not None
        assert (task.agent.pk, task.skill.pk, task.state) == (agent.pk, skill.pk, stored.state)
    assert Task.claim_many([t.pk for t in due]) == []  # held now
    assert Task.claim_many([]) == []


@postgres
def test_without_a_transaction_workers_hear_of_a_task_after_it_is_logged(
    make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any, caplog: Any
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    told: list[tuple[list[Any], bool]] = []

    def hint(ids: list[Any]) -> None:
        logged = any(
            "created" in r.getMessage() for r in caplog.records if r.name == "a2a.lifecycle"
        )
        told.append((ids, logged))

    monkeypatch.setattr(creation, "queue_processing_many", hint)
    caplog.set_level("INFO", logger="a2a.lifecycle")
    made = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    assert told == [([made.pk], True)]
