"""The deadline sweep racing a person who starts the task again: a task read overdue
and reassigned (or failed and retried) before the timeout's write is a fresh attempt,
in the same state (SUBMITTED) with a new deadline. It is not failed at once, blaming
the agent it was taken from, nor is that agent's old task scheduled for a cancel."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, deadlines, reassign, services
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports.base import AgentReply

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(skill: Any, make_agent: Any, user: Any) -> Task:
    make_agent(skills=[skill])
    make_agent(skills=[skill], id="agent-two", a2a_endpoint="http://127.0.0.1:9/two")
    return creation.create_task(
        skill_id=skill.id, input={"product": "lamp"}, agent_id="agent-one", user=user
    )


def overdue(task: Task, **fields: Any) -> None:
    """Sent once, and its deadline passed with no final answer."""
    Task.objects.filter(pk=task.pk).update(
        deadline_at=timezone.now() - timedelta(seconds=5), attempts=1, **fields
    )
    task.refresh_from_db()


def during_the_last_read(monkeypatch: Any, act: Callable[[Task], Any]) -> None:
    """While the sweep reads the overdue tasks' agents (up to a call's timeout), a person
    acts on the task (another process's copy of the row)."""

    def read(tasks: list[Task]) -> deadlines.LastRead:
        act(Task.objects.select_related("agent", "skill").get(pk=tasks[0].pk))
        return {}

    monkeypatch.setattr(deadlines, "read_before_timeout", read)
    monkeypatch.setattr(reassign, "_tell_old_agent", lambda old: {})


def to_agent_two(row: Task) -> None:
    reassign.reassign_task(row, agent_id="agent-two", by="ops")


@pytest.mark.parametrize("remote_task_id", ["", "r-1"])
def test_a_task_reassigned_during_the_sweep_is_not_timed_out(
    task: Task, monkeypatch: Any, remote_task_id: str
) -> None:
    """The agent never answered, or took the message and went quiet (SUBMITTED at the
    agent): the reason a person reassigns it."""
    overdue(task, remote_task_id=remote_task_id)
    during_the_last_read(monkeypatch, to_agent_two)
    assert deadlines.expire_overdue() == 0
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.error) == ("agent-two", TaskState.SUBMITTED, None)
    assert task.next_action == NextAction.SEND  # its send, not a cancel of the old one
    assert task.deadline_at > timezone.now()


def test_a_task_retried_during_the_sweep_is_not_timed_out(task: Task, monkeypatch: Any) -> None:
    """Read SUBMITTED overdue; meanwhile its send failed for good and a person retried it."""
    overdue(task)

    def failed_and_retried(row: Task) -> None:
        row.fail("agent_refused", "Agent 'agent-one' did not accept the task: HTTP 400")
        services.retry_task(row, by="ops")

    during_the_last_read(monkeypatch, failed_and_retried)
    assert deadlines.expire_overdue() == 0
    task.refresh_from_db()
    assert (task.state, task.error, task.next_action) == (
        TaskState.SUBMITTED,
        None,
        NextAction.SEND,
    )
    assert len(task.metadata["retries"]) == 1


def test_a_worker_timing_out_a_task_just_reassigned_leaves_it(task: Task, monkeypatch: Any) -> None:
    """The worker's own timeout (it claimed the task past its deadline) too."""
    overdue(task, remote_task_id="r-1")
    claimed = Task.objects.select_related("agent", "skill").get(pk=task.pk)
    to_agent_two(Task.objects.get(pk=task.pk))
    monkeypatch.setattr(deadlines, "read_before_timeout", lambda tasks: {})
    assert deadlines.time_out(claimed) is False
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.error) == ("agent-two", TaskState.SUBMITTED, None)


def test_a_task_still_overdue_is_timed_out(task: Task, monkeypatch: Any) -> None:
    """The condition is the row the sweep read: nothing moved it, so it fails."""
    overdue(task, remote_task_id="r-1")
    monkeypatch.setattr(deadlines, "read_before_timeout", lambda tasks: {})
    assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"], task.next_action) == (
        TaskState.FAILED,
        "timeout",
        NextAction.CANCEL,
    )


@pytest.mark.parametrize("state", ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"])
def test_the_last_read_of_a_task_reassigned_meanwhile_is_not_applied(
    task: Task, monkeypatch: Any, state: str
) -> None:
    """The old agent's answer to the read (its task working, or asking) belongs to the
    attempt the task was taken from: the fresh one shows none of it (a2a.overtaken_calls)."""
    overdue(task, remote_task_id="r-1", next_action=NextAction.POLL)
    monkeypatch.setattr(reassign, "_tell_old_agent", lambda old: {})
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which colour?"}]}

    def read_all(tasks: list[Task], targets: Any) -> list[Any]:
        if not tasks:  # a round with nothing left to read
            return []
        to_agent_two(Task.objects.select_related("agent", "skill").get(pk=tasks[0].pk))
        remote = {"id": "r-1", "contextId": "c-1", "status": {"state": state, "message": question}}
        return [(AgentReply(task=remote), 0.1)]

    monkeypatch.setattr(deadlines, "_read_all", read_all)
    assert deadlines.expire_overdue() == 0
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.next_action) == (
        "agent-two",
        TaskState.SUBMITTED,
        NextAction.SEND,
    )
    assert (task.remote_task_id, task.remote_context_id, task.question) == ("", "", None)
