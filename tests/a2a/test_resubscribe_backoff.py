"""Subscribes to a streamed task back off as polls do: an agent that closes every
subscribe at once on the task as it was, or answers busy, was subscribed to again twice
a second until the task's deadline (about 600 calls per task), its ``Retry-After``
ignored. A stream that brought news, or lasted, is followed again from the base interval;
a task waiting for authorization is listened to, its silence no error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, long_calls, worker
from a2a.models import Task
from a2a.states import NextAction, TaskState
from tests.support.raw_sse import (
    RawStreamAgent,
    register,
    run_raw_stream_agent,
    sse,
    status_event,
    task_event,
)

pytestmark = pytest.mark.django_db(transaction=True)

WORKING, AUTH = "TASK_STATE_WORKING", "TASK_STATE_AUTH_REQUIRED"


@pytest.fixture
def raw(make_skill: Any, make_agent: Any, settings: Any) -> Iterator[RawStreamAgent]:
    """An agent that cannot be polled: its stream names task t1, working, and ends."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.5
    settings.A2A_POLL_BACKOFF = 1.5
    settings.A2A_POLL_INTERVAL_MAX = 10.0
    with run_raw_stream_agent() as agent:
        register(make_agent, make_skill(id="ce-review"), agent)
        agent.stream = lambda: [sse(task_event("t1", WORKING))]
        agent.subscribe = lambda: [sse(task_event("t1", WORKING))]
        yield agent


def _streamed(user: Any) -> Task:
    """A task whose first message went out over the agent's stream."""
    task = creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
    return _run_due(task)


def _run_due(task: Task) -> Task:
    """Run the task's next action now (as the sweep would once it is due); the task after."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
    worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def _due_in(task: Task) -> float:
    assert task.next_poll_at is not None
    return (task.next_poll_at - timezone.now()).total_seconds()


def test_subscribes_closed_at_once_back_off(raw: RawStreamAgent, make_user: Any) -> None:
    task = _streamed(make_user())
    # The send's stream brought news (the agent's task, working): the base interval.
    assert (task.state, task.next_action, task.poll_interval) == (
        TaskState.WORKING,
        NextAction.FOLLOW,
        0.5,
    )
    intervals = []
    for _ in range(4):
        task = _run_due(task)
        intervals.append(task.poll_interval)
        assert task.next_action == NextAction.FOLLOW
        assert 0 < _due_in(task) <= task.poll_interval
    assert raw.counts["subscribe"] == 4
    assert intervals == sorted(intervals), intervals
    assert intervals[0] > 0.5, intervals
    assert intervals[-1] >= 0.5 * 1.5**4 * 0.9, intervals


def test_a_busy_agents_retry_after_is_obeyed(raw: RawStreamAgent, make_user: Any) -> None:
    task = _streamed(make_user())
    raw.busy_for = 30
    task = _run_due(task)
    assert (task.state, task.next_action) == (TaskState.WORKING, NextAction.FOLLOW)
    assert (task.error or {}).get("code") == "agent_http_error"
    assert _due_in(task) > 25  # not in half a second, as before


def test_a_stream_with_news_is_followed_again_from_the_base_interval(
    raw: RawStreamAgent, make_user: Any
) -> None:
    task = _streamed(make_user())
    for _ in range(3):
        task = _run_due(task)
    assert task.poll_interval > 1.0  # backed off
    raw.subscribe = lambda: [
        sse(task_event("t1", WORKING)),
        sse(status_event("t1", "TASK_STATE_INPUT_REQUIRED")),
    ]
    task = _run_due(task)
    assert task.state == TaskState.INPUT_REQUIRED


def test_a_waiting_subscribes_silence_is_no_error(
    raw: RawStreamAgent, make_user: Any, settings: Any
) -> None:
    """A task waiting for authorization: the subscribe listens for the call's time; when
    the agent said nothing, it is subscribed to again, and the task shows no error."""
    settings.A2A_LONG_CALL_MAX = 1.0
    raw.stream = lambda: [sse(task_event("t1", WORKING)), sse(status_event("t1", AUTH))]
    task = _streamed(make_user())
    assert (task.state, task.next_action) == (TaskState.AUTH_REQUIRED, NextAction.FOLLOW)

    def silent() -> Iterator[bytes]:
        yield sse(task_event("t1", AUTH))
        time.sleep(2.0)  # nothing more for longer than the call may last

    raw.subscribe = silent
    # Its deadline passed long ago: a wait has none (the subscribe is not cut to a second).
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(hours=1))
    task = _run_due(task)
    assert (task.state, task.next_action, task.error) == (
        TaskState.AUTH_REQUIRED,
        NextAction.FOLLOW,
        None,
    )
    assert raw.counts["subscribe"] == 1


def test_a_waiting_subscribe_gives_its_thread_back_when_long_calls_are_crowded(
    raw: RawStreamAgent, make_user: Any, settings: Any
) -> None:
    """More than half of the agent's long calls taken (tasks streaming at work): the
    subscribe of a task waiting for authorization ends at the task as it is, and the
    next one backs off, rather than hold a thread those tasks need."""
    settings.A2A_LONG_CALLS_PER_AGENT = 2
    raw.stream = lambda: [sse(task_event("t1", WORKING)), sse(status_event("t1", AUTH))]
    task = _streamed(make_user())

    def silent() -> Iterator[bytes]:
        yield sse(task_event("t1", AUTH))
        time.sleep(2.0)  # then the stream ends: listened to, the subscribe lasts that long

    raw.subscribe = silent
    long_calls.became_long("agent-one")
    long_calls.became_long("agent-one")
    try:
        task = _run_due(task)
    finally:
        long_calls.ended("agent-one")
        long_calls.ended("agent-one")
    assert (task.state, task.next_action, task.error) == (
        TaskState.AUTH_REQUIRED,
        NextAction.FOLLOW,
        None,
    )
    assert task.poll_interval > 0.5  # backing off, as a poll that found nothing new
