"""Long calls (a stream followed to its end, a blocking send, a send the agent holds) run on
threads of their own, at most ``A2A_LONG_CALLS_PER_AGENT`` per agent and ``A2A_LONG_CALLS``
in all per process (a2a/long_calls.py): the threads that start tasks stay free, and an
agent that hangs holds a bounded number of threads.

Against real a2a-sdk agents and the embedded mode's own workers (local dispatch, sweep).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import long_calls
from a2a.creation import create_task
from a2a.models import Task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def few_threads(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_EMBEDDED_THREADS = 2  # the threads that start tasks
    settings.A2A_SWEEP_INTERVAL = 0.3


@pytest.fixture
def streamer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture
def quick() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


def start(user: Any, skill_id: str, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return create_task(skill_id=skill_id, input=data, user=user)


def test_streams_to_an_agent_leave_the_threads_that_start_tasks_free(
    few_threads: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    streamer: TestAgent,
    quick: TestAgent,
) -> None:
    """Four tasks followed over streams for seconds (an agent that cannot be polled) and,
    after them, a task for another agent: with two threads to start tasks, it used to
    wait for a stream's end."""
    slow_skill, quick_skill = make_skill(id="ce-review"), make_skill(id="quick-review")
    make_agent(id="streamer", skills=[slow_skill], a2a_endpoint=streamer.url, polling=False)
    make_agent(id="quick", skills=[quick_skill], a2a_endpoint=quick.url)
    user = make_user()
    with embedded_workers():
        slow = [start(user, "ce-review", "slow", seconds=4) for _ in range(4)]
        for task in slow:
            wait_for(task, lambda t: t.state == TaskState.WORKING)
        done = wait_for(start(user, "quick-review", "complete"), timeout=10)
        assert done.state == TaskState.COMPLETED
        # Ended while every stream still ran.
        assert [Task.objects.get(pk=t.pk).state for t in slow] == [TaskState.WORKING] * 4
        for task in slow:
            assert wait_for(task).state == TaskState.COMPLETED
    followed = {t.metadata.get("followedBy") for t in Task.objects.filter(agent_id="streamer")}
    assert followed == {"stream"}


def test_an_agents_long_calls_are_bounded_and_the_rest_wait_in_their_rows(
    few_threads: None,
    settings: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    streamer: TestAgent,
) -> None:
    """At most A2A_LONG_CALLS_PER_AGENT streams to one agent at once: the others are not
    sent until one ends (no attempt counted meanwhile), then all end."""
    settings.A2A_LONG_CALLS_PER_AGENT = 2
    make_agent(
        id="streamer", skills=[make_skill(id="ce-review")], a2a_endpoint=streamer.url, polling=False
    )
    user = make_user()
    with embedded_workers():
        tasks = [start(user, "ce-review", "slow", seconds=3) for _ in range(4)]
        wait_for(tasks[0], lambda t: sum(long_calls.running().values()) == 2)
        assert long_calls.running() == {"streamer": 2}
        states = sorted(
            (t.state, t.attempts) for t in Task.objects.filter(pk__in=[t.pk for t in tasks])
        )
        assert states[:2] == [(TaskState.SUBMITTED, 0)] * 2  # waiting, not sent
        for task in tasks:
            assert wait_for(task, timeout=20).state == TaskState.COMPLETED
        assert [t.attempts for t in Task.objects.filter(pk__in=[t.pk for t in tasks])] == [1] * 4
    assert counted_streams(streamer) == 4


def counted_streams(peer: TestAgent) -> int:
    return sum(n for path, n in peer.counts.items() if path.endswith("/message:stream"))


def test_a_long_call_finds_no_room_past_the_process_bound(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """A2A_LONG_CALLS bounds them in all: a task that finds no room is due again a moment
    later, its claim let go; a running one frees its room when it ends."""
    settings.A2A_LONG_CALLS = 1
    skill = make_skill(id="ce-review")
    make_agent(id="a", skills=[skill], polling=False)
    make_agent(id="b", skills=[skill], polling=False)
    user = make_user()
    first = create_task(skill_id="ce-review", input={"product": "x"}, user=user, agent_id="a")
    second = create_task(skill_id="ce-review", input={"product": "y"}, user=user, agent_id="b")
    release = threading.Event()
    ran: list[Any] = []

    def run(task: Task) -> None:
        ran.append((task.pk, long_calls.on_own_thread()))
        release.wait(10)

    long_calls.start()
    try:
        assert long_calls.take(Task.claim(first.pk), run) is True
        wait_for(first, lambda t: ran == [(first.pk, True)])
        before = timezone.now()
        assert long_calls.take(Task.claim(second.pk), run) is True  # deferred
        second.refresh_from_db()
        assert second.lease_until <= timezone.now() < second.next_poll_at
        assert second.next_poll_at >= before + timedelta(seconds=long_calls.WAIT_SECONDS)
        assert (second.next_action, second.attempts) == (NextAction.SEND, 0)
        assert long_calls.running() == {"a": 1}
        release.set()
        wait_for(first, lambda t: long_calls.running() == {})
    finally:
        release.set()
        long_calls.stop()
    assert long_calls.take(Task.claim(second.pk) or second, run) is False  # not taken here


class _StoppedMeanwhile:
    """A claimed task whose ``agent_id``, read by :func:`long_calls.take` after its look at
    the flags and before its lock, lets a whole ``stop()`` run first: the interleaving a
    SIGTERM can bring."""

    def __init__(self, task: Task) -> None:
        self._task = task
        self.stopped: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)

    @property
    def agent_id(self) -> str:
        stop = threading.Thread(target=lambda: self.stopped.append(long_calls.stop(wait=5)))
        stop.start()
        stop.join(10)
        return self._task.agent_id


def test_no_long_call_starts_after_a_stop_counted_none(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """A stop that found no long call running returns, and the process exits: a call
    started after its count would be cut off. It is left due instead."""
    make_agent(id="a", skills=[make_skill(id="ce-review")], polling=False)
    task = create_task(skill_id="ce-review", input={"product": "x"}, user=make_user(), agent_id="a")
    release = threading.Event()
    long_calls.start()
    racy = _StoppedMeanwhile(Task.claim(task.pk))
    try:
        assert long_calls.take(racy, lambda _: release.wait(5)) is True
        assert racy.stopped == [0]
        assert long_calls.running() == {}
        row = Task.objects.get(pk=task.pk)
        assert row.next_action == NextAction.SEND
        assert row.next_poll_at is not None
        assert row.next_poll_at > timezone.now()
    finally:
        release.set()
        long_calls.stop(wait=5)
