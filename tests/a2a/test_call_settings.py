"""An agent's own call settings: ``timeoutMs`` replaces A2A_TASK_TIMEOUT for its tasks
(from each attempt's start), ``pollIntervalMs`` is the first poll interval."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_calls, creation, deadlines, follow_policy, reassign, services, worker
from a2a.agent_updates import task_timeout
from a2a.models import Task
from a2a.states import ACTIVE_STATES, NextAction, TaskState
from agent_profiles.interfaces import call_target
from platform_site.env import FLOAT_MAX
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill], timeout=7.0, poll_interval=2.5)
    created = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
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

    assert deadlines.fail_timeout(task)
    assert "7 s (the agent's timeoutMs)" in task.error["message"]


def _failed_an_hour_ago(task: Task) -> Task:
    """The task as one created an hour ago that failed (longer ago than ``timeoutMs``)."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Task.objects.filter(pk=task.pk).update(
        created_at=an_hour_ago,
        state=TaskState.FAILED,
        error={"code": "agent_failed", "message": "it broke"},
        next_action=NextAction.NONE,
        next_poll_at=None,
        lease_until=None,
    )
    task.refresh_from_db()
    return task


@pytest.mark.parametrize("again", ["retry", "reassign"])
def test_a_fresh_attempt_gets_the_agents_timeout_from_its_start(
    again: str, peer: TestAgent, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    """A person's retry or reassignment starts a fresh attempt, whose deadline starts
    again: from the creation, a task retried later than the agent's ``timeoutMs`` after it
    was sent with its deadline past, and failed ``timeout`` at the next sweep."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url, timeout=60.0)
    make_agent(id="agent-two", skills=[skill], a2a_endpoint=peer.url, timeout=60.0)
    data = {"product": "lamp", "behaviour": "working"}
    task = creation.create_task(skill_id=skill.id, input=data, user=make_user())
    task = _failed_an_hour_ago(task)
    if again == "retry":
        services.retry_task(task)
    else:
        reassign.reassign_task(task, agent_id="agent-two")
    began = timezone.now()
    worker.process_task(task.pk)  # the fresh attempt's send
    task.refresh_from_db()
    assert task.remote_task_id
    assert task.state in ACTIVE_STATES
    assert began < task.deadline_at <= began + timedelta(seconds=61)
    deadlines.expire_overdue()  # what the next sweep does
    task.refresh_from_db()
    assert task.state in ACTIVE_STATES, task.error


def _window(task: Task) -> float:
    """Seconds from now to the task's deadline."""
    task.refresh_from_db()
    return (task.deadline_at - timezone.now()).total_seconds()


@pytest.mark.parametrize("endpoint", ["", "http://127.0.0.1:9/"])
def test_the_agents_timeout_sets_every_deadline_it_starts(
    endpoint: str, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    """``timeoutMs`` at the creation, a reply and a retry, without an HTTP send: a
    socket-only agent's tasks kept A2A_TASK_TIMEOUT while their timeout said timeoutMs."""
    settings.A2A_TASK_TIMEOUT = 300.0
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=endpoint, timeout=3600.0)
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    assert _window(task) == pytest.approx(3600, abs=5)
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.INPUT_REQUIRED, deadline_at=timezone.now()
    )
    task.refresh_from_db()
    services.reply_to_task(task, text="blue", by="ops")
    assert _window(task) == pytest.approx(3600, abs=5)
    task = _failed_an_hour_ago(task)
    services.retry_task(task)
    assert _window(task) == pytest.approx(3600, abs=5)


def test_without_a_timeout_the_setting_sets_the_deadline(
    make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    settings.A2A_TASK_TIMEOUT = 300.0
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint="")
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    assert _window(task) == pytest.approx(300, abs=5)


@pytest.mark.parametrize("followup", [False, True])
def test_a_huge_agent_timeout_sets_a_deadline_without_overflowing(
    followup: bool, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """An agent's timeout of 1e12 (saved by the admin's editor before it had bounds):
    creation was bounded, then every send overflowed the date here and its task ended
    FAILED internal_error. It counts FLOAT_MAX seconds, as every deadline does, and the
    timeout's message names that."""
    skill = make_skill()
    make_agent(skills=[skill], timeout=1e12)
    created = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    task = Task.objects.select_related("agent", "skill").get(pk=created.pk)
    agent_calls._apply_timeout(task, call_target(task.agent), followup=followup)
    assert _window(task) == pytest.approx(FLOAT_MAX, rel=1e-6)
    assert task_timeout(task) == (FLOAT_MAX, "the agent's timeoutMs")
