"""A listing that read its rows before a person reassigned or retried the task.

Against a real a2a-sdk agent followed by listing: the listing found the platform task by
the agent's task id, then the person's reassign (or retry, after the task failed) wrote a
fresh attempt before the listed end was applied. That end is the old attempt's: it must
not end the fresh one (it was applied as CANCELED or COMPLETED at the new agent, with the
old agent's task id).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from a2a import agent_push, reassign, services
from a2a.models import Task
from a2a.states import NextAction, TaskState
from agent_profiles.models import Skill
from tests.a2a.listing.support import listed_now, start
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)


def before_the_apply(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    real_apply = agent_push.apply

    def apply(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(agent_push, "apply", real_apply)
        act()
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(agent_push, "apply", apply)


def fresh(task: Task) -> Task:
    """The task as the person's request reads it."""
    return Task.objects.select_related("agent", "skill").get(pk=task.pk)


@pytest.mark.parametrize("how", ["reassign", "retry"])
def test_a_listed_end_of_the_old_attempt_leaves_the_fresh_one_alone(
    setup: Any, peer: TestAgent, make_agent: Any, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    make_agent(skills=[Skill.objects.get(pk="ce-review")], id="agent-two", a2a_endpoint=peer.url)
    task = start(setup, "slow", seconds=0.2)
    assert task.metadata["followedBy"] == "list"
    time.sleep(0.5)  # the agent's task completed

    def act() -> None:
        if how == "reassign":
            reassign.reassign_task(fresh(task), agent_id="agent-two", by=setup)
        else:
            fresh(task).fail("timeout", "timed out")
            services.retry_task(fresh(task), by=setup)

    before_the_apply(monkeypatch, act)
    listed_now()
    task.refresh_from_db()
    assert (task.state, task.next_action, task.remote_task_id) == (
        TaskState.SUBMITTED,
        NextAction.SEND,
        "",
    )
    assert task.agent_id == ("agent-two" if how == "reassign" else "agent-one")
