"""A send to an agent not yet known to hold its sends is waited for past
``A2A_HTTP_TIMEOUT`` instead of being sent again (a2a/send_watch.py): the agent runs the
task once, and the thread that sent it steps aside for a new one, so the threads that
start tasks stay free.

Against a real a2a-sdk agent in the samples' shape (it reports nothing until its answer,
so a2a-sdk holds the send) and the embedded mode's own threads (local dispatch), here one
thread to start tasks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import lease_keeper, local_dispatch, long_calls, send_watch, worker
from a2a.creation import create_task
from a2a.models import Task
from a2a.states import TaskState
from a2a.tasks import process
from agent_profiles.models import AgentProfile
from tests.a2a.helpers import lose_new_tasks_hints, wait_for
from tests.support.agents import TestAgent, run_agent
from tests.support.sample_agent import run_sample_agent

pytestmark = pytest.mark.django_db(transaction=True)  # pool threads see committed rows


@pytest.fixture
def one_thread(settings: Any) -> Iterator[None]:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0
    settings.A2A_HTTP_TIMEOUT = 0.5
    local_dispatch.start(1)
    try:
        yield
    finally:
        local_dispatch.stop()
    assert send_watch._watches == set()
    assert long_calls.running() == {}


@pytest.fixture
def quick() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


def eventually(rows: Any, timeout: float = 5.0) -> Any:
    """The first row of ``rows()`` once there is one; fail on timeout."""
    deadline = time.monotonic() + timeout
    while (row := rows().first()) is None:
        assert time.monotonic() < deadline, "never came"
        time.sleep(0.05)
    return row


def start(user: Any, skill_id: str, **data: Any) -> Task:
    return create_task(skill_id=skill_id, input={"product": "lamp", **data}, user=user)


@pytest.mark.parametrize("streaming", [False, True], ids=["no-streams", "streams"])
def test_a_send_held_past_the_timeout_is_waited_for_and_the_agent_runs_the_task_once(
    one_thread: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    quick: TestAgent,
    streaming: bool,
) -> None:
    held_skill, quick_skill = make_skill(id="ce-review"), make_skill(id="quick-review")
    make_agent(id="quick", skills=[quick_skill], a2a_endpoint=quick.url)
    user = make_user()
    with run_sample_agent(seconds=3.0, streaming=streaming) as sample:
        make_agent(id="sample", skills=[held_skill], a2a_endpoint=sample.url)
        task = start(user, "ce-review")
        # Past A2A_HTTP_TIMEOUT the send became a long call, the agent a holder ...
        agent = eventually(lambda: AgentProfile.objects.filter(pk="sample", early_return=False))
        assert "it was waited for, not sent again" in agent.no_early_return_reason
        assert long_calls.running() == {"sample": 1}
        # the wait's claim: kept, renewed while it waits (a2a.lease_keeper)
        assert lease_keeper.kept_ids() == [task.pk]
        held = Task.objects.get(pk=task.pk)
        assert held.lease_until > timezone.now() + timedelta(seconds=lease_keeper.lease() / 2)
        assert local_dispatch.pending() == 0  # its thread stepped aside
        # ... and the pool's one thread, a new one, starts another agent's task meanwhile.
        other = wait_for(start(user, "quick-review"), timeout=5)
        assert other.state == TaskState.COMPLETED
        assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED  # still held
        done = wait_for(task, timeout=10)
        assert (done.state, done.output["verdict"], done.attempts) == (
            TaskState.COMPLETED,
            "pass",
            1,
        )
        assert done.error is None
        assert len(sample.inputs) == 1  # sent once: before, twice
        # The next task goes the way of a known holder (a stream, or a held send).
        later = wait_for(start(user, "ce-review", product="desk"), timeout=10)
        assert (later.state, later.output["product"], later.attempts) == (
            TaskState.COMPLETED,
            "desk",
            1,
        )
        assert len(sample.inputs) == 2


@pytest.mark.parametrize("by", ["sweep", "retry"])
def test_a_send_the_sweep_or_a_retry_makes_is_watched_on_the_threads_that_start_tasks(
    one_thread: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    by: str,
) -> None:
    """A task whose hint was lost is sent by the sweep; a retry's hint comes as a Celery
    message (``a2a.process``). Either way the send goes to the threads that start tasks,
    where it is watched: on the sweep's own threads or a Celery worker's it gave up at
    A2A_HTTP_TIMEOUT, and the agent ran the task twice."""
    settings.A2A_HINT_GRACE = 0
    lose_new_tasks_hints(monkeypatch)
    with run_sample_agent(seconds=2.0, streaming=False) as sample:
        make_agent(id="sample", skills=[make_skill(id="ce-review")], a2a_endpoint=sample.url)
        task = start(make_user(), "ce-review")
        if by == "sweep":
            assert worker.sweep()["processed"] == 1  # claimed, and handed over
        else:
            process(str(task.pk))
        # It returned with the send still to answer: nothing waits on it here.
        assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED
        done = wait_for(task, timeout=10)
        assert (done.state, done.attempts, done.error) == (TaskState.COMPLETED, 1, None)
        assert len(sample.inputs) == 1
        agent = AgentProfile.objects.get(pk="sample")
        assert "it was waited for, not sent again" in agent.no_early_return_reason


def test_the_sweep_sends_it_itself_when_no_thread_that_starts_tasks_is_free(
    one_thread: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    quick: TestAgent,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A send handed over to a busy pool would queue while its claim runs out: the sweep
    keeps it and sends it on its own thread, as before; with a thread free, it hands it
    over."""
    settings.A2A_HINT_GRACE = 0
    lose_new_tasks_hints(monkeypatch)
    handed: list[Any] = []
    take_claimed = local_dispatch.take_claimed
    monkeypatch.setattr(
        local_dispatch, "take_claimed", lambda *args: handed.append(args) or take_claimed(*args)
    )
    make_agent(id="quick", skills=[make_skill(id="quick-review")], a2a_endpoint=quick.url)
    user = make_user()
    has_room = local_dispatch.has_room
    monkeypatch.setattr(local_dispatch, "has_room", lambda: False)
    busy = start(user, "quick-review")
    assert worker.sweep()["processed"] == 1
    assert handed == []
    assert Task.objects.get(pk=busy.pk).state == TaskState.COMPLETED  # sent by the sweep
    monkeypatch.setattr(local_dispatch, "has_room", has_room)
    free = start(user, "quick-review", product="desk")
    assert worker.sweep()["processed"] == 1
    assert [task_id for task_id, _ in handed] == [free.pk]
    assert wait_for(free, timeout=5).state == TaskState.COMPLETED


def test_a_send_answered_in_time_marks_nothing(
    one_thread: None, make_skill: Any, make_agent: Any, make_user: Any, quick: TestAgent
) -> None:
    agent = make_agent(id="quick", skills=[make_skill(id="quick-review")], a2a_endpoint=quick.url)
    user = make_user()
    tasks = [start(user, "quick-review", product=f"p{i}") for i in range(3)]
    assert [wait_for(t).state for t in tasks] == [TaskState.COMPLETED] * 3
    agent.refresh_from_db()
    assert (agent.early_return, agent.no_early_return_reason) == (True, "")
    assert quick.sends == 3


def test_a_send_with_no_room_for_a_long_call_waits_the_timeout_as_before(
    one_thread: None, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    """With no room for one more long call to the agent, the send is not watched: it gives
    up at A2A_HTTP_TIMEOUT and is sent again later, as an unwatched send is."""
    settings.A2A_LONG_CALLS_PER_AGENT = 0
    with run_sample_agent(seconds=1.0, streaming=False) as sample:
        make_agent(id="sample", skills=[make_skill(id="ce-review")], a2a_endpoint=sample.url)
        task = start(make_user(), "ce-review")
        task = wait_for(task, lambda t: (t.error or {}).get("code") == "agent_timeout", timeout=5)
        assert (task.state, task.attempts) == (TaskState.SUBMITTED, 1)
        assert long_calls.running() == {}


def test_a_watchdog_inherited_dead_from_a_fork_is_started_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process forked after its watchdog started has the thread object, not the thread:
    a watch added there still comes due."""
    import threading
    from types import SimpleNamespace

    came: list[Any] = []
    monkeypatch.setattr(send_watch, "_become_long", came.append)
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    send_watch._watchdog = dead  # not restored: the one started here goes on watching
    watch = send_watch._Watch(
        task=SimpleNamespace(agent_id="a"),  # type: ignore[arg-type]
        pool=None,  # type: ignore[arg-type]
        thread=threading.current_thread(),
        seconds=60.0,
        due=time.monotonic(),
    )
    send_watch._add(watch)
    deadline = time.monotonic() + 5
    while not came:
        assert time.monotonic() < deadline, "the watch never came due"
        time.sleep(0.01)
    assert came == [watch]
    assert send_watch._watchdog is not dead
    assert send_watch._watches == set()
