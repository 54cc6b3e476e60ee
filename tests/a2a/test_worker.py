"""Claims and leases: no two workers act on one task; a dead worker's lease expires."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from a2a import follow_policy, services, worker
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from agent_profiles.interfaces import CallTarget

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill])
    return services.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())


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
    services.apply_agent_update(task, status={"state": "input-required"}, via="a2a")
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
    from a2a.scheduling import due_filter

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
    assert worker.expire_overdue() == 1
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
    assert worker.expire_overdue() == 1
    task.refresh_from_db()
    assert task.error["details"]["sent"] is True
    assert task.error["message"].startswith(f"Timed out: agent '{task.agent_id}' gave no")
    assert task.next_action == NextAction.CANCEL  # the agent has it: it is asked to cancel


def test_the_most_overdue_tasks_fail_first(task: Task, settings: Any) -> None:
    settings.A2A_POLL_BATCH = 2
    later = [services.create_task(skill_id=task.skill_id, input={"product": "y"}) for _ in "ab"]
    now = timezone.now()
    # the oldest task is the most overdue, the newest the least
    for seconds, each in zip((3, 2, 1), [task, *later], strict=True):
        Task.objects.filter(pk=each.pk).update(deadline_at=now - timedelta(seconds=seconds))
    assert worker.expire_overdue() == 2
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
    plan = worker.overdue(timezone.now()).explain()
    # both conditions from the index: no task in flight is read to find the overdue ones
    assert "task_state_deadline" in plan, plan
    lines = plan.splitlines()
    # an index scan or a bitmap index scan, with both conditions in the index's
    scan = next(i for i, line in enumerate(lines) if "on task_state_deadline" in line)
    assert "Index Cond" in lines[scan + 1], plan
    assert "deadline_at" in lines[scan + 1], plan


def test_the_poll_interval_backs_off_to_the_cap(task: Task, settings: Any) -> None:
    settings.A2A_POLL_INTERVAL, settings.A2A_POLL_BACKOFF = 1.0, 2.0
    settings.A2A_POLL_INTERVAL_MAX = 3.0
    task = Task.objects.select_related("agent").get(pk=task.pk)
    task.next_poll_at = None  # no poll came late (that is the next test)
    seen = []
    for _ in range(4):
        worker.schedule_poll(task, grow=True)
        seen.append(task.poll_interval)
    assert seen == [2.0, 3.0, 3.0, 3.0]
    worker.schedule_poll(task, grow=False)
    assert task.poll_interval == 1.0


def test_a_late_poll_backs_off_from_the_time_the_task_was_quiet(task: Task, settings: Any) -> None:
    """The backoff follows the time a task has been seen unchanged, not the number of its
    polls: a poll that comes late (the workers behind) grows the interval from the time
    since the last poll. On time, the interval grows as before; news starts again."""
    settings.A2A_POLL_INTERVAL, settings.A2A_POLL_BACKOFF = 1.0, 2.0
    settings.A2A_POLL_INTERVAL_MAX = 30.0
    task = Task.objects.select_related("agent").get(pk=task.pk)

    def poll(due_seconds_ago: float, interval: float) -> float:
        before = timezone.now()  # the poll's due time is set just before its answer
        task.next_poll_at = before - timedelta(seconds=due_seconds_ago)
        task.poll_interval = interval
        assert worker.schedule_poll(task, grow=True)
        # due after the interval (at the cap, sooner: the next tests)
        delay = follow_policy.within_the_cap(task.poll_interval, 1.0, max(0.0, due_seconds_ago))
        assert task.next_poll_at >= before + timedelta(seconds=delay)
        return task.poll_interval

    assert poll(0.0, 1.0) == pytest.approx(2.0, abs=0.05)  # on time: interval x backoff
    assert poll(-5.0, 1.0) == pytest.approx(2.0, abs=0.05)  # early (not due yet): the same
    assert poll(4.0, 1.0) == pytest.approx(10.0, abs=0.05)  # 4 s late: quiet for 5 s
    assert poll(60.0, 1.0) == 30.0  # a minute late: never past the cap
    task.next_poll_at, task.poll_interval = None, 2.0  # no due time known: the interval
    worker.schedule_poll(task, grow=True)
    assert task.poll_interval == 4.0
    task.next_poll_at = timezone.now() - timedelta(seconds=20)
    worker.schedule_poll(task, grow=False)  # news: from the base, however late
    assert task.poll_interval == 1.0


def test_a_poll_at_the_cap_is_due_one_sweep_sooner(task: Task, settings: Any) -> None:
    """A due poll waits for the next sweep (up to A2A_SWEEP_INTERVAL): a poll at the cap
    is due that much sooner, so that polls are at most the cap apart; below the cap, and
    never sooner than the agent's own pollIntervalMs, it waits its interval."""
    settings.A2A_POLL_INTERVAL, settings.A2A_POLL_BACKOFF = 1.0, 2.0
    settings.A2A_POLL_INTERVAL_MAX, settings.A2A_SWEEP_INTERVAL = 10.0, 1.5
    task = Task.objects.select_related("agent").get(pk=task.pk)

    def poll(interval: float) -> tuple[float, float]:
        task.next_poll_at, task.poll_interval = None, interval
        before = timezone.now()
        assert worker.schedule_poll(task, grow=True)
        return round((task.next_poll_at - before).total_seconds(), 1), task.poll_interval

    assert poll(4.0) == (8.0, 8.0)  # below the cap: the interval
    assert poll(8.0) == (8.5, 10.0)  # reaching it: the cap less a sweep
    assert poll(10.0) == (8.5, 10.0)  # at it: the same, the interval stays the cap
    # An agent that asked for 9.5 s between polls is not polled sooner than that.
    agent = CallTarget(agent_id=task.agent_id, poll_interval_seconds=9.5)
    assert follow_policy.next_poll(task, agent, grow=True) == (9.5, 10.0)
    agent = CallTarget(agent_id=task.agent_id, poll_interval_seconds=30.0)
    assert follow_policy.next_poll(task, agent, grow=True) == (30.0, 30.0)  # past the cap


def test_a_late_poll_at_the_cap_makes_up_its_lateness(task: Task, settings: Any) -> None:
    """A poll at the cap that came late (waiting for a sweep and its turn in one) has its
    successor due that much sooner again, up to one more sweep interval, so that under
    the same load polls stay within the cap of each other; more than two sweep intervals
    late, the workers are behind and the next poll is not brought forward at all."""
    settings.A2A_POLL_INTERVAL, settings.A2A_POLL_BACKOFF = 1.0, 2.0
    settings.A2A_POLL_INTERVAL_MAX, settings.A2A_SWEEP_INTERVAL = 10.0, 1.5
    task = Task.objects.select_related("agent").get(pk=task.pk)

    def delay_after(late: float, interval: float = 10.0) -> float:
        task.poll_interval = interval
        before = timezone.now()
        task.next_poll_at = before - timedelta(seconds=late)
        assert worker.schedule_poll(task, grow=True)
        return round((task.next_poll_at - before).total_seconds(), 1)

    assert delay_after(0.0) == 8.5  # on time: the cap less a sweep
    assert task.poll_interval == 10.0
    assert delay_after(0.6) == 7.9  # 0.6 s late: that much sooner
    assert delay_after(2.5) == 7.0  # at most one sweep sooner again
    assert delay_after(3.5) == 8.5  # behind: not sooner at all
    assert delay_after(40.0) == 8.5
    # Just under the cap (quiet 4.5 s, times 2: 9 s), the same bound holds.
    assert delay_after(0.5, interval=4.0) == 8.0
    assert task.poll_interval == pytest.approx(9.0, abs=0.05)
    assert delay_after(0.0, interval=2.0) == 4.0  # well under it: the interval
    # Never sooner than the agent's own pollIntervalMs.
    task.next_poll_at = timezone.now() - timedelta(seconds=1.0)
    agent = CallTarget(agent_id=task.agent_id, poll_interval_seconds=8.0)
    assert follow_policy.next_poll(task, agent, grow=True)[0] == 8.0


@pytest.mark.parametrize(
    ("followed_by", "setting"),
    [("push", "AGENT_PUSH_POLL_INTERVAL"), ("list", "A2A_LIST_POLL_INTERVAL")],
)
def test_safety_net_polls_back_off_to_their_own_cap(
    task: Task, settings: Any, followed_by: str, setting: str, monkeypatch: Any
) -> None:
    """A task its agent's pushes (or listings) follow is polled only as a safety net:
    from the safety interval, backing off while the polls find nothing new, up to
    A2A_SAFETY_POLL_INTERVAL_MAX (not A2A_POLL_INTERVAL_MAX, which is for polled tasks)."""
    from a2a import agent_listing

    setattr(settings, setting, 60.0)
    settings.A2A_POLL_BACKOFF, settings.A2A_SAFETY_POLL_INTERVAL_MAX = 2.0, 200.0
    monkeypatch.setattr(agent_listing, "follows", lambda t, target: followed_by == "list")
    Task.objects.filter(pk=task.pk).update(metadata={"followedBy": followed_by})
    task = Task.objects.select_related("agent").get(pk=task.pk)
    seen = []
    for _ in range(4):
        before = timezone.now()
        worker.schedule_poll(task, grow=True)
        seen.append(task.poll_interval)
        assert task.next_poll_at >= before + timedelta(seconds=task.poll_interval)
    assert seen == [60.0, 120.0, 200.0, 200.0]
    worker.schedule_poll(task, grow=False)  # the last poll found news: from the start
    assert task.poll_interval == 60.0


@pytest.mark.parametrize("followed_by", ["push", "list"])
def test_safety_net_polls_are_spread_over_their_jitter(
    task: Task, settings: Any, followed_by: str, monkeypatch: Any
) -> None:
    """Tasks sent together are not polled together: each safety-net poll waits its
    interval plus a random part of it, up to A2A_SAFETY_POLL_JITTER times it, never less;
    the interval the backoff grows from has no jitter. Without jitter, every delay is
    the interval (the batch in the benchmark of 60-s tasks met their end pushes)."""
    from a2a import agent_listing

    settings.AGENT_PUSH_POLL_INTERVAL = settings.A2A_LIST_POLL_INTERVAL = 60.0
    monkeypatch.setattr(agent_listing, "follows", lambda t, target: followed_by == "list")
    Task.objects.filter(pk=task.pk).update(metadata={"followedBy": followed_by})
    task = Task.objects.select_related("agent").get(pk=task.pk)

    def delays(jitter: float) -> list[float]:
        settings.A2A_SAFETY_POLL_JITTER = jitter
        seen = []
        for _ in range(30):
            before = timezone.now()
            worker.schedule_poll(task, grow=False)
            assert task.poll_interval == 60.0
            seen.append((task.next_poll_at - before).total_seconds())
        return seen

    spread = delays(0.25)
    assert all(60.0 <= d <= 75.5 for d in spread)
    assert max(spread) - min(spread) > 3.0  # 30 draws over 15 s: apart, not one second
    assert all(60.0 <= d <= 60.5 for d in delays(0.0))


def test_an_agent_poll_interval_overrides_the_setting(task: Task) -> None:
    task = Task.objects.select_related("agent").get(pk=task.pk)
    task.agent.poll_interval = 5.0
    worker.schedule_poll(task, grow=False, retry_after=7.0)
    assert task.poll_interval == 5.0
    assert task.next_poll_at >= timezone.now() + timedelta(seconds=6)


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
    assert worker.lease_seconds() == 25.0


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
    settings.A2A_LONG_CALL_MAX = 120.0
    task.schedule(NextAction.FOLLOW)
    claimed = worker.claim(task.pk)
    assert worker._long_action(claimed)
    worker._hand_off(claimed)  # what the sweep's thread does instead of waiting for it
    task.refresh_from_db()
    assert task.lease_until > timezone.now() + timedelta(seconds=100)  # held for the call
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
    task = services.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
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
