"""Polled tasks followed by listing in the live platform (embedded on SQLite; daphne, a
Celery worker and beat on PostgreSQL + Redis in the distributed pass), against a real
a2a-sdk agent: the sweep's listings carry the tasks to their ends, with no ``GetTask``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from a2a import creation, services
from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent, run_agent
from tests.support.processes import live_platform_for_mode

pytestmark = pytest.mark.slow

ENV: dict[str, Any] = {
    "ALLOW_LOOPBACK_URLS": True,
    "A2A_SWEEP_INTERVAL": 0.3,
    "A2A_LIST_INTERVAL": 0.3,
    # Each task's own polls are a minute apart: within this test only listings move them.
    "A2A_LIST_POLL_INTERVAL": 60,
}


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture
def user(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> Any:
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    return make_user()


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def test_listings_carry_polled_tasks_to_their_ends(user: Any, peer: TestAgent) -> None:
    with live_platform_for_mode(**ENV):
        slow = [start(user, "slow", seconds=1) for _ in range(4)]
        asked = start(user, "ask")
        failing = start(user, "fail")
        slow = [wait_for(task, timeout=30) for task in slow]
        asked = wait_for(asked, lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=30)
        services.reply_to_task(asked, text="EU")
        asked = wait_for(asked, timeout=30)
        failing = wait_for(failing, timeout=30)
    for task in slow:
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert task.metadata["followedBy"] == "list"
        assert peer.requests_for(task.remote_task_id) == 0  # no GetTask: the listing told
        assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert (asked.state, asked.output["answer"]) == (TaskState.COMPLETED, "EU")
    assert (failing.state, failing.error["code"]) == (TaskState.FAILED, "agent_failed")
    assert peer.sends == 7  # six tasks and the reply
    assert peer.counts["/tasks"] >= 2
