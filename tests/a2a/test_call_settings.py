"""An agent's own call settings: ``timeoutMs`` replaces A2A_TASK_TIMEOUT for its tasks,
``pollIntervalMs`` is the first poll interval."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from a2a import agent_calls, follow_policy, services
from a2a.models import Task
from agent_profiles.interfaces import call_target

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill], timeout=7.0, poll_interval=2.5)
    created = services.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    return Task.objects.select_related("agent", "skill").get(pk=created.pk)


def test_the_agents_timeout_sets_the_deadline(task: Task, settings: Any) -> None:
    settings.A2A_TASK_TIMEOUT = 300.0
    agent_calls._apply_timeout(task, call_target(task.agent), followup=False)
    task.refresh_from_db()
    assert task.deadline_at == task.created_at + timedelta(seconds=7)


def test_the_agents_poll_interval_is_the_first_interval(task: Task, settings: Any) -> None:
    settings.A2A_POLL_INTERVAL = 0.5
    target = call_target(task.agent)
    assert follow_policy.base_interval(task, target) == 2.5
    follow_policy.schedule_poll(task, target, grow=False)
    assert task.poll_interval == 2.5


def test_a_timeout_names_the_agents_setting(task: Task) -> None:
    from a2a import worker

    assert worker.fail_timeout(task)
    assert "7 s (the agent's timeoutMs)" in task.error["message"]
