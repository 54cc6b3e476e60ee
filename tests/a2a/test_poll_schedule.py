"""How a polled task's next poll is scheduled: the backoff to the cap, late polls, the
bound within the cap, safety-net polls and their jitter, an agent's own interval. The
``task`` is the shared one of ``conftest.py``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import follow_policy, worker
from a2a.models import Task
from agent_profiles.interfaces import CallTarget

pytestmark = pytest.mark.django_db


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
