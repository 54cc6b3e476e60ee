"""Claims and leases: no two workers act on one task; a dead worker's lease expires."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from a2a import agent_updates, creation, deadlines, worker
from a2a.claims import lease_seconds
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill])
    return creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())


def test_a_task_is_claimed_once(task: Task) -> None:
    assert worker.claim(task.pk) is not None
    assert worker.claim(task.pk) is None
    assert worker.claim_due(10) == []


def test_an_expired_lease_can_be_claimed_again(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert worker.claim_due(10) == [task.pk]


def test_the_sweep_leaves_a_new_task_to_its_hint_for_the_grace_only(task: Task) -> None:
    # just created, never claimed: its hint starts it; the sweep does not race it
    assert worker.claim_due(10, leave_new_for=5) == []
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now() - timedelta(seconds=6))
    # the hint was lost: after the grace the sweep takes it
    assert worker.claim_due(10, leave_new_for=5) == [task.pk]


def test_the_grace_covers_only_new_never_claimed_sends(task: Task) -> None:
    # claimed once, then its worker died: its lease ran out, so the sweep takes it at once
    Task.objects.filter(pk=task.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert worker.claim_due(10, leave_new_for=5) == [task.pk]
    # a send that failed once and is due again (a retry) is not new either
    Task.objects.filter(pk=task.pk).update(lease_until=None, attempts=1)
    assert worker.claim_due(10, leave_new_for=5) == [task.pk]
    # nor is a poll
    Task.objects.filter(pk=task.pk).update(
        lease_until=None, attempts=0, next_action=NextAction.POLL
    )
    assert worker.claim_due(10, leave_new_for=5) == [task.pk]


def test_a_task_not_yet_due_is_not_claimed(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now() + timedelta(seconds=60))
    assert worker.claim(task.pk) is None
    assert worker.claim_due(10) == []


def test_a_task_waiting_for_a_person_is_not_claimed(task: Task) -> None:
    agent_updates.apply_agent_update(task, status={"state": "input-required"}, via="a2a")
    assert worker.claim_due(10) == []


@pytest.mark.parametrize(
    ("action", "due_in", "held_for", "claimed"),
    [
        (NextAction.SEND, -1, None, True),
        (NextAction.POLL, 0, None, True),  # due this very moment
        (NextAction.POLL, -1, -1, True),  # a lease that ran out
        (NextAction.POLL, -1, 60, False),  # held by another worker
        (NextAction.SEND, 60, None, False),  # not yet due
        (NextAction.SEND, None, None, False),  # no time set
        (NextAction.NONE, -1, None, False),  # nothing to do
    ],
)
def test_the_plain_claim_takes_exactly_what_the_due_filter_names(
    task: Task, action: str, due_in: int | None, held_for: int | None, claimed: bool
) -> None:
    from a2a.claims import due_filter

    now = timezone.now()
    Task.objects.filter(pk=task.pk).update(
        next_action=action,
        next_poll_at=None if due_in is None else now + timedelta(seconds=due_in),
        lease_until=None if held_for is None else now + timedelta(seconds=held_for),
    )
    assert Task.objects.filter(due_filter(now), pk=task.pk).exists() is claimed
    lease = now + timedelta(seconds=30)
    assert Task._claim_row(task.pk, now, lease) == int(claimed)
    expected = (
        lease if claimed else (None if held_for is None else now + timedelta(seconds=held_for))
    )
    assert Task.objects.get(pk=task.pk).lease_until == expected


def test_the_sweep_fails_overdue_tasks(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert task.next_action == NextAction.NONE  # the agent never had it: nothing to cancel
    # Its error says so, rather than blaming the agent for an answer it could not give.
    assert task.error["details"]["sent"] is False
    assert task.error["message"].startswith("Timed out before it was sent")
    assert "A2A_AGENT_SENDS_IN_FLIGHT" in task.error["message"]


def test_a_sent_task_that_times_out_names_the_agent(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(
        attempts=1, remote_task_id="r-1", deadline_at=timezone.now() - timedelta(seconds=1)
    )
    assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert task.error["details"]["sent"] is True
    assert task.error["message"].startswith(f"Timed out: agent '{task.agent_id}' gave no")
    assert task.next_action == NextAction.CANCEL  # the agent has it: it is asked to cancel


def test_the_most_overdue_tasks_fail_first(task: Task, settings: Any) -> None:
    settings.A2A_POLL_BATCH = 2
    later = [creation.create_task(skill_id=task.skill_id, input={"product": "y"}) for _ in "ab"]
    now = timezone.now()
    # the oldest task is the most overdue, the newest the least
    for seconds, each in zip((3, 2, 1), [task, *later], strict=True):
        Task.objects.filter(pk=each.pk).update(deadline_at=now - timedelta(seconds=seconds))
    assert deadlines.expire_overdue() == 2
    states = {t.pk: t.state for t in Task.objects.all()}
    assert states[task.pk] == states[later[0].pk] == TaskState.FAILED
    assert states[later[1].pk] == TaskState.SUBMITTED  # next sweep


@pytest.mark.postgres
def test_the_overdue_search_reads_an_index_of_state_and_deadline(task: Task) -> None:
    # A table like a running platform's: mostly history, some tasks in flight, one overdue.
    now = timezone.now()
    fields = {"skill_id": task.skill_id, "agent_id": task.agent_id, "created_by": task.created_by}
    Task.objects.bulk_create(
        [Task(state=TaskState.COMPLETED, deadline_at=now, **fields) for _ in range(2000)]
        + [
            Task(state=TaskState.WORKING, deadline_at=now + timedelta(hours=1), **fields)
            for _ in range(200)
        ]
    )
    Task.objects.filter(pk=task.pk).update(deadline_at=now - timedelta(seconds=1))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE a2a_task")
    plan = deadlines.overdue(timezone.now()).explain()
    # both conditions from the index: no task in flight is read to find the overdue ones
    assert "task_state_deadline" in plan, plan
    lines = plan.splitlines()
    # an index scan ("Index Scan using task_state_deadline on a2a_task") or a bitmap
    # index scan ("Bitmap Index Scan on task_state_deadline"), as the statistics have it,
    # with both conditions in the index's
    scan = next(i for i, line in enumerate(lines) if "task_state_deadline" in line)
    assert "Index Cond" in lines[scan + 1], plan
    assert "deadline_at" in lines[scan + 1], plan


def test_an_internal_error_is_retried_then_fails_the_task(task: Task) -> None:
    for _ in range(worker.MAX_INTERNAL_ERRORS):
        worker._internal_error(task, RuntimeError("bug"))
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "internal_error")


def test_a_task_the_gateway_carries_is_left_to_it(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(transport="websocket")
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED
    assert (task.next_action, task.lease_until, task.attempts) == (NextAction.NONE, None, 0)


def test_a_lease_outlasts_one_agent_call(settings: Any) -> None:
    settings.A2A_LEASE_SECONDS, settings.A2A_HTTP_TIMEOUT = 5.0, 20.0
    settings.A2A_CONNECT_TIMEOUT = 3.0
    assert lease_seconds() == 25.0


def test_an_endpoint_now_private_is_not_called(task: Task) -> None:
    # Registered while it resolved elsewhere; at send time the guard refuses it, and the
    # task goes to the gateway instead of the private address.
    task.agent.a2a_endpoint = "http://10.1.2.3:9/"
    task.agent.save()
    worker.process_task(task.pk)
    task.refresh_from_db()
    fallback = task.metadata["fallbacks"][0]
    assert (task.transport, fallback["from"], fallback["to"]) == ("offline", "a2a", "offline")
    assert "not allowed" in fallback["reason"]


def test_internal_errors_on_a_finished_tasks_cancel_give_up(task: Task) -> None:
    task.cancel("by a test")
    task.schedule(NextAction.CANCEL)
    for _ in range(worker.MAX_INTERNAL_ERRORS):
        worker._internal_error(task, RuntimeError("bug"))
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.CANCELED, NextAction.NONE)


def test_the_sweep_hands_a_long_call_off_with_its_claim(task: Task, settings: Any) -> None:
    settings.A2A_LONG_CALL_LEASE = 120.0
    task.schedule(NextAction.FOLLOW)
    claimed = worker.claim(task.pk)
    assert worker._long_action(claimed)
    worker._hand_off(claimed)  # what the sweep's thread does instead of waiting for it
    task.refresh_from_db()
    # held until a worker keeps it for the call (a2a.lease_keeper)
    assert task.lease_until > timezone.now() + timedelta(seconds=100)
    assert worker.claim(task.pk) is None  # nobody else takes it meanwhile
    assert Task.take_over(task.pk, "not-a-time") is None
    assert Task.take_over(task.pk, (task.lease_until - timedelta(seconds=1)).isoformat()) is None
    assert Task.take_over(task.pk, task.lease_until.isoformat()) is not None


def test_a_send_that_fails_before_reaching_the_agent_still_counts_as_an_attempt(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    # The agent's card names a binding the platform does not speak: the send fails while
    # choosing the transport, before the attempt is otherwise recorded.
    skill = make_skill()
    make_agent(
        skills=[skill],
        card_read_at=timezone.now(),
        interface={"binding": "GRPC", "version": "1.0", "url": "http://127.0.0.1:9/"},
    )
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert task.attempts == 1
    # The platform cannot call it over HTTP: it waits for the agent's WebSocket.
    assert task.transport == Transport.OFFLINE


def test_the_sweep_skips_a_task_deleted_since_its_claim(
    db: None, caplog: pytest.LogCaptureFixture
) -> None:
    # The claim held, then the row went (an operator deleted it): nothing to run, no error.
    with caplog.at_level("ERROR"):
        worker._run_in_thread(uuid.uuid4())
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []
