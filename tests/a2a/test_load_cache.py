"""The candidates' load is counted once a second per process (a2a/lookups.py): a burst of
creations must still be spread, because each assignment is counted in at once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from a2a import creation, lookups
from a2a.models import Task
from a2a.states import TaskState


@pytest.fixture
def two_agents(db: None, make_skill: Any, make_agent: Any) -> None:
    skill = make_skill()
    make_agent(id="agent-a", skills=[skill])
    make_agent(id="agent-b", skills=[skill])


def create(user: Any) -> Task:
    return creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)


def test_a_burst_is_spread_while_the_load_is_cached(two_agents: None, make_user: Any) -> None:
    user = make_user()
    picked = Counter(create(user).agent_id for _ in range(6))
    assert picked == {"agent-a": 3, "agent-b": 3}


def test_load_counted_elsewhere_shows_once_the_cache_is_gone(
    two_agents: None, make_user: Any, settings: Any
) -> None:
    user = make_user()
    first = create(user)  # counts the load, then counts this task in
    # Another process ends it: this process's count is a second old at most.
    Task.objects.filter(pk=first.pk).update(state=TaskState.COMPLETED)
    assert create(user).agent_id != first.agent_id  # from the cached count
    lookups.clear()
    settings.A2A_LOAD_CACHE_SECONDS = 0
    # Counted afresh: one active task each way before, now only the second one.
    assert create(user).agent_id == first.agent_id


def test_a_named_agent_is_looked_up_alone(two_agents: None, make_user: Any) -> None:
    user = make_user()
    task = creation.create_task(
        skill_id="ce-review", input={"product": "lamp"}, user=user, agent_id="agent-b"
    )
    assert task.agent_id == "agent-b"
    # One row read, not every candidate of the skill (a thousand agents may offer it).
    assert lookups._candidates == {}
    assert lookups.candidate(task.skill, "agent-a") is not None
    assert lookups.candidate(task.skill, "agent-zz") is None
