"""The distributed mode: PostgreSQL, Redis, and Celery worker and beat as processes.

The crash tests kill a worker (SIGKILL) while it waits on the agent's answer: the task's
lease expires, beat's sweep hands it to a new worker, which sends the same message
again (same messageId), and the task completes exactly once; the hints the worker had
popped from the Redis list die with it, and the sweep starts their tasks.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest
import redis
from django.conf import settings

from a2a import creation, hint_queue, services
from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from platform_site.celery import app as celery_app
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, beat_proc, celery_worker, started, worker_proc

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = {**FAST_ENGINE, "A2A_HTTP_TIMEOUT": 2}


@pytest.fixture
def setup(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: Any
) -> Any:
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    return make_user()


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def test_worker_processes_follow_tasks_to_the_end(setup: Any, peer: TestAgent) -> None:
    with started(worker_proc(**ENV), beat_proc(**ENV)):
        done = wait_for(start(setup, "complete"), timeout=30)
        slow = wait_for(start(setup, "slow", seconds=1), timeout=30)
        asked = wait_for(
            start(setup, "ask"), lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=30
        )
        services.reply_to_task(asked, text="EU")
        asked = wait_for(asked, timeout=30)
    assert (done.state, done.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert slow.state == TaskState.COMPLETED
    # Followed by the worker's listings of the agent (no GetTask needed).
    assert slow.metadata["followedBy"] == "list"
    assert peer.counts["/tasks"] >= 1
    assert asked.state == TaskState.COMPLETED
    assert asked.output["answer"] == "EU"


def test_a_killed_worker_only_delays_the_task_which_completes_once(
    setup: Any, peer: TestAgent
) -> None:
    with ExitStack() as stack:
        _, first = stack.enter_context(started(beat_proc(**ENV), worker_proc("first", **ENV)))
        task = start(setup, "slowsend", seconds=1.5)
        # The first worker is inside message:send when the agent has the message.
        wait_for(task, lambda t: len(peer.messages) == 1 and t.lease_until is not None)
        first.kill()
        task.refresh_from_db()
        assert task.state == TaskState.SUBMITTED
        second = stack.enter_context(celery_worker("second", **ENV))
        task = wait_for(task, timeout=30)
        assert second.alive()
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    # Re-sent as the same attempt: the same messageId both times.
    ids = [m["messageId"] for m in peer.messages]
    assert ids == [task.outbound_message["messageId"]] * 2
    assert task.attempts == 2


def test_concurrent_workers_never_process_a_task_twice(setup: Any, peer: TestAgent) -> None:
    with ExitStack() as stack:
        procs = (beat_proc(**ENV), worker_proc("w0", **ENV), worker_proc("w1", **ENV))
        stack.enter_context(started(*procs))
        tasks = [start(setup, "slow", seconds=0.5) for _ in range(10)]
        tasks = [wait_for(t, timeout=40) for t in tasks]
    assert all(t.state == TaskState.COMPLETED for t in tasks)
    assert peer.sends == 10
    completed = TaskEvent.objects.filter(to_state=TaskState.COMPLETED).count()
    assert completed == 10


def test_a_worker_killed_holding_hints_only_delays_their_tasks(setup: Any, peer: TestAgent) -> None:
    env = {**ENV, "A2A_HINT_THREADS": 1}  # room for two popped hints: one sent, one waiting
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(hint_queue.key())
    # An earlier test's beat may have left sweeps queued (they expire after 5 s): one
    # run by this worker would send the tasks whose hints it holds.
    celery_app.control.purge()
    with ExitStack() as stack:
        first = stack.enter_context(celery_worker("first", **env))
        first.wait_log(r"listening for task hints", timeout=10)
        hint_queue.forget_listeners()
        tasks = [start(setup, "slowsend", seconds=1.5) for _ in range(3)]
        # The hints went through the list: the worker took the two it had room for (one
        # is being sent, one waits for its thread) and left the third there.
        wait_for(
            tasks[0],
            lambda t: len(peer.messages) == 1 and client.llen(hint_queue.key()) == 1,
            timeout=20,
        )
        first.kill()
        _, second = stack.enter_context(started(beat_proc(**ENV), worker_proc("second", **ENV)))
        tasks = [wait_for(t, timeout=40) for t in tasks]
        assert second.alive()
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * 3
    assert TaskEvent.objects.filter(to_state=TaskState.COMPLETED).count() == 3
    sent = [m["messageId"] for m in peer.messages]
    # Each went with its own messageId; the one cut off in its send (if the kill landed
    # inside it) went again with the same one.
    assert set(sent) == {t.outbound_message["messageId"] for t in tasks}
    assert len(sent) - len(set(sent)) <= 1


@pytest.fixture
def streamer(transactional_db: None, make_skill: Any, make_agent: Any, peer: Any) -> Any:
    """The agent of ``ce-review`` cannot be polled: its tasks are followed over streams
    (long calls); ``quick-review`` is an ordinary agent of the same peer."""
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    make_agent(id="quick", skills=[make_skill(id="quick-review")], a2a_endpoint=peer.url)


def test_long_streams_leave_the_hint_threads_free(
    streamer: None, make_user: Any, peer: TestAgent
) -> None:
    """Three tasks streaming for seconds at a worker with two threads to start tasks: a
    task for another agent still starts at once (each stream has a thread of its own)."""
    user = make_user()
    env = {**ENV, "A2A_HINT_THREADS": 2}
    with started(worker_proc(**env), beat_proc(**env)):
        slow = [start(user, "slow", seconds=6) for _ in range(3)]
        for task in slow:
            wait_for(task, lambda t: t.state == TaskState.WORKING, timeout=30)
        quick = creation.create_task(skill_id="quick-review", input={"product": "lamp"}, user=user)
        assert wait_for(quick, timeout=30).state == TaskState.COMPLETED
        assert [Task.objects.get(pk=t.pk).state for t in slow] == [TaskState.WORKING] * 3
        for task in slow:
            assert wait_for(task, timeout=30).state == TaskState.COMPLETED
    assert {t.metadata["followedBy"] for t in slow} == {"stream"}


def test_a_worker_killed_mid_stream_only_delays_the_task_which_completes_once(
    streamer: None, make_user: Any, peer: TestAgent
) -> None:
    """The worker dies while its long call's thread reads the agent's stream: the claim
    (A2A_LONG_CALL_LEASE, renewed while the call ran) runs out, another worker subscribes
    to the agent's task, which is still running, and the task completes once, long before
    its deadline; the message was sent once. The long call could have run to the
    deadline (A2A_LONG_CALL_MAX): its claim, taken up front for that time, held the task
    until the sweep failed it ``timeout``."""
    with ExitStack() as stack:
        _, first = stack.enter_context(started(beat_proc(**ENV), worker_proc("first", **ENV)))
        task = start(make_user(), "slow", seconds=20)
        wait_for(task, lambda t: t.state == TaskState.WORKING and t.remote_task_id, timeout=30)
        first.kill()
        stack.enter_context(celery_worker("second", **ENV))
        task = wait_for(task, timeout=60)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert len(peer.messages) == 1  # picked up by a subscribe, not sent again


def test_a_send_held_past_the_timeout_is_waited_for_at_a_worker(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """A real a2a-sdk agent in the samples' shape holds a first send past
    A2A_HTTP_TIMEOUT: the worker's hint thread waits for it (a2a.send_watch) and steps
    aside, so with one hint thread another agent's task still starts meanwhile; the
    held task runs once at its agent."""
    from tests.support.sample_agent import run_sample_agent

    make_agent(id="quick", skills=[make_skill(id="quick-review")], a2a_endpoint=peer.url)
    user = make_user()
    env = {**ENV, "A2A_HINT_THREADS": 1}
    with run_sample_agent(seconds=6.0, streaming=False) as sample:
        make_agent(id="sample", skills=[make_skill()], a2a_endpoint=sample.url)
        with started(worker_proc(**env), beat_proc(**env)):
            held = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
            wait_for(held, lambda t: bool(sample.inputs), timeout=30)
            quick = creation.create_task(skill_id="quick-review", input={"product": "b"}, user=user)
            assert wait_for(quick, timeout=30).state == TaskState.COMPLETED
            assert Task.objects.get(pk=held.pk).state == TaskState.SUBMITTED  # still held
            held = wait_for(held, timeout=30)
    assert (held.state, held.output["verdict"], held.attempts) == (TaskState.COMPLETED, "pass", 1)
    assert len(sample.inputs) == 1


def test_a_worker_killed_during_a_held_send_only_delays_the_task(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The worker dies while its send, become a long call (an agent that holds its sends:
    a2a.send_watch), waits for the answer: the claim, kept for the wait, runs out
    (A2A_LONG_CALL_LEASE), another worker sends the task again, as a known
    holder's, and the task completes once. The agent had the message and gets it again:
    nothing told the platform the agent's task id before the answer."""
    from agent_profiles.models import AgentProfile
    from tests.support.sample_agent import run_sample_agent

    env = {**ENV, "A2A_HTTP_TIMEOUT": 1, "A2A_LONG_CALL_MAX": 4}
    with run_sample_agent(seconds=3.0, streaming=False) as sample:
        make_agent(id="sample", skills=[make_skill()], a2a_endpoint=sample.url)
        with ExitStack() as stack:
            _, first = stack.enter_context(started(beat_proc(**env), worker_proc("first", **env)))
            task = creation.create_task(
                skill_id="ce-review", input={"product": "lamp"}, user=make_user()
            )
            marked = AgentProfile.objects.filter(pk="sample", early_return=False)
            wait_for(task, lambda t: marked.exists(), timeout=30)  # waited for, past 1 s
            first.kill()
            assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED
            stack.enter_context(celery_worker("second", **env))
            task = wait_for(task, timeout=60)
    assert (task.state, task.output["verdict"], task.attempts) == (TaskState.COMPLETED, "pass", 2)
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert len(sample.inputs) == 2
