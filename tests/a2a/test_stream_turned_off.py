"""A task followed by stream whose agent no longer streams (its card says so now, after a
redeployment): polled, if the agent may be polled, not parked with ``cannot_follow`` to
run out at its deadline."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import agent_streams
from a2a.models import Task
from a2a.states import NextAction, TaskState
from agent_profiles.models import AgentProfile
from tests.a2a.helpers import working

pytestmark = pytest.mark.django_db


def followed(task: Task, **agent: Any) -> Task:
    working(task)
    task.refresh_from_db()
    assert task.schedule(NextAction.FOLLOW, 0.0, if_state=task.state)
    AgentProfile.objects.filter(pk=task.agent_id).update(streaming=False, **agent)
    row = Task.objects.select_related("agent").get(pk=task.pk)
    agent_streams.follow(row)
    return Task.objects.get(pk=task.pk)


def test_it_is_polled_when_the_agent_may_be(task: Task) -> None:
    row = followed(task)
    assert (row.state, row.next_action, row.error) == (TaskState.WORKING, NextAction.POLL, None)


def test_it_cannot_be_followed_when_the_agent_may_not_be_polled(task: Task) -> None:
    row = followed(task, polling=False)
    assert row.error["code"] == "cannot_follow"
    assert row.next_action == NextAction.NONE
