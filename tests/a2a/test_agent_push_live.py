"""Agents that push, end to end: a real a2a-sdk agent with the SDK's push sender, the live
platform (embedded on SQLite, daphne + Celery worker and beat in the distributed pass)
and its webhook. Slow: few tests, each covering a lot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.conf import settings

from a2a import creation, services
from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.processes import beat_proc, daphne_proc, embedded_platform, started, worker_proc
from tests.support.push_agents import PushAgent, run_push_agent
from tests.support.serving import free_port

pytestmark = pytest.mark.slow

ENV: dict[str, Any] = {
    "ALLOW_LOOPBACK_URLS": True,
    "A2A_POLL_INTERVAL": 0.2,
    "A2A_POLL_INTERVAL_MAX": 0.5,
    "A2A_SWEEP_INTERVAL": 0.3,
}


def live(**env: Any) -> ExitStack:
    """The platform in this pass's mode, every process knowing its public URL (the
    worker builds the webhook URLs from it)."""
    stack = ExitStack()
    port = free_port()
    if settings.DISTRIBUTED:
        url = f"http://127.0.0.1:{port}"
        procs = (worker_proc(PUBLIC_URL=url, **env), beat_proc(**env), daphne_proc(port, **env))
        stack.enter_context(started(*procs))
    else:
        stack.enter_context(embedded_platform(port, **env))
    return stack


@pytest.fixture
def peer() -> Iterator[PushAgent]:
    with run_push_agent() as agent:
        yield agent


@pytest.fixture
def user(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: PushAgent
) -> Any:
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    return make_user()


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def test_a_pushing_agent_is_followed_by_its_pushes(user: Any, peer: PushAgent) -> None:
    # Safety-net polls every 60 s: within this test only pushes can move the tasks.
    with live(AGENT_PUSH_POLL_INTERVAL=60, **ENV):
        slow = start(user, "slow", seconds=1)
        asked = start(user, "ask")
        failing = start(user, "fail")
        slow = wait_for(slow, timeout=30)
        asked = wait_for(asked, lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=30)
        services.reply_to_task(asked, text="EU")
        asked = wait_for(asked, timeout=30)
        failing = wait_for(failing, timeout=30)
        # The agent's last pushes may trail the ends the platform recorded.
        peer.wait_pushes_settled()
    assert (slow.state, slow.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert slow.metadata["followedBy"] == "push"
    # One send, no poll: the agent's pushes carried the task to its end.
    assert peer.requests_for(slow.remote_task_id) == 0
    assert peer.sends == 4  # three tasks and the reply
    assert peer.pushes >= 3
    assert peer.push_failures == 0
    assert asked.state == TaskState.COMPLETED
    assert asked.output["answer"] == "EU"
    assert failing.state == TaskState.FAILED
    assert failing.error["code"] == "agent_failed"
    for task in (slow, asked):
        assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1


def test_polling_finishes_a_task_whose_pushes_are_lost(user: Any, peer: PushAgent) -> None:
    # Every push is refused (too large for this webhook): the agent's pushes are lost, and
    # the safety-net polls (every second here) still finish the task.
    with live(AGENT_PUSH_POLL_INTERVAL=1, AGENT_PUSH_MAX_BYTES=10, **ENV):
        task = wait_for(start(user, "slow", seconds=1), timeout=30)
    assert task.state == TaskState.COMPLETED
    assert task.metadata["followedBy"] == "push"
    assert peer.push_failures >= 1
    assert 1 <= peer.requests_for(task.remote_task_id) <= 4


def test_pushed_chunks_past_the_artifacts_cap_fail_the_task(user: Any, peer: PushAgent) -> None:
    """The SDK's push sender appends ten 1,000-character chunks; the platform keeps 5 kB
    of a task's artifacts: the push that passes it gets 413 and fails the task, the rest
    get 409, and the agent is asked to cancel its task."""
    with live(AGENT_PUSH_POLL_INTERVAL=60, TASK_ARTIFACTS_MAX_BYTES=5000, **ENV):
        task = wait_for(start(user, "chunks", chunks=10, size=1000), timeout=30)
        task = wait_for(task, lambda t: "remoteCancel" in t.metadata, timeout=30)
        peer.wait_pushes_settled()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "artifacts_too_large")
    assert task.metadata["followedBy"] == "push"
    assert task.error["details"]["maxBytes"] == 5000
    kept = next(a for a in task.artifacts if a["artifactId"] == "chunked")
    assert 1 <= len(kept["parts"]) < 10
    assert peer.push_failures >= 1  # the 413, and the 409s of the pushes after it
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.FAILED).count() == 1
