"""A timed-out task started again (reassigned or retried) before the worker sent the
cancel the deadline sweep left for the agent's task: the move sends that cancel itself,
and a retry from a stale read keeps what happened since."""

from __future__ import annotations

from typing import Any

import kombu.exceptions
import pytest
from rest_framework.test import APIClient

from a2a import agent_updates, deadlines, services, tasks
from a2a.exceptions import A2ATransientError
from a2a.models import Task
from a2a.reassign import reassign_task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import working
from tests.a2a.reassign.helpers import OldAgent, old_agent, reassign, stale

pytestmark = pytest.mark.django_db


# --- a timed-out task's cancel, not sent yet ----------------------------------------------
# The sweep failed the task 'timeout' and left the cancel of the agent's task to a worker
# (next action CANCEL); a person starts it again first, its send in the cancel's place.


def timed_out(task: Task) -> Task:
    working(task)
    assert deadlines.fail_timeout(stale(task))
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.FAILED, NextAction.CANCEL)
    return task


def test_a_reassign_of_a_timed_out_task_cancels_the_old_agents_task(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    agent = old_agent(monkeypatch, OldAgent(task))
    timed_out(task)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.next_action) == ("agent-two", NextAction.SEND)
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    assert task.metadata["reassignments"][-1]["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}


def test_a_failed_task_whose_cancel_was_sent_tells_nobody(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """The agent failed the task itself (or the worker sent the timeout's cancel)."""
    agent = old_agent(monkeypatch, OldAgent(task))
    working(task)
    agent_updates.apply_agent_update(stale(task), status={"state": "TASK_STATE_FAILED"}, via="a2a")
    assert reassign(api, task).status_code == 200
    assert api.post(f"/api/tasks/{task.pk}/retry").status_code == 409  # SUBMITTED now
    task.refresh_from_db()
    assert "remoteCancel" not in task.metadata["reassignments"][-1]
    assert agent.told == []


def test_a_retry_of_a_timed_out_task_cancels_the_agents_old_task(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    agent = old_agent(monkeypatch, OldAgent(task))
    timed_out(task)
    response = api.post(f"/api/tasks/{task.pk}/retry")
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.remote_task_id, task.next_action) == (
        "agent-one",
        "",
        NextAction.SEND,
    )
    assert agent.told == [("r-1", "agent-one", TaskState.SUBMITTED)]
    told = task.metadata["retries"][-1]["remoteCancel"]
    assert (told["taskId"], told["state"]) == ("r-1", "TASK_STATE_CANCELED")
    assert response.json()["metadata"]["retries"][-1]["remoteCancel"] == told


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (A2ATransientError("down", code="agent_unreachable"), "agent_unreachable"),
        (RuntimeError("credential unreadable"), "internal_error"),
    ],
)
def test_a_retry_whose_cancel_fails_still_stands(
    api: APIClient, task: Task, monkeypatch: Any, error: Exception, code: str
) -> None:
    class Refuses(OldAgent):
        def cancel(self, remote_id: str, timeout: float = 0.0) -> Any:
            raise error

    old_agent(monkeypatch, Refuses(task))
    timed_out(task)
    assert api.post(f"/api/tasks/{task.pk}/retry").status_code == 200
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.SUBMITTED, NextAction.SEND)
    told = task.metadata["retries"][-1]["remoteCancel"]
    assert (told["taskId"], told["error"]["code"]) == ("r-1", code)


def test_a_retry_from_a_stale_read_keeps_what_happened_since(task: Task) -> None:
    """Read failed at agent-one; meanwhile reassigned to agent-two, where it failed too:
    the retry is agent-two's, and the reassignment stays on record."""
    task.fail("agent_failed", "Agent 'agent-one': broke")
    seen = stale(task)
    reassign_task(stale(task), agent_id="agent-two", by="ann")
    stale(task).fail("agent_failed", "Agent 'agent-two': broke")
    services.retry_task(seen, by="bob")
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-two", TaskState.SUBMITTED)
    assert len(task.metadata["reassignments"]) == 1
    assert task.metadata["retries"][-1]["previousError"]["message"] == "Agent 'agent-two': broke"


def test_a_list_retry_leaves_the_old_agents_cancel_to_a_worker(
    admin_client: Any, task: Task, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Told in the operator's request, each cancel waited for its agent in turn (3 s
    each for a hung agent: a selection of thousands held the request for hours)."""
    agent = old_agent(monkeypatch, OldAgent(task))
    timed_out(task)
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.tell_owed_cancel, "delay", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            "/admin/a2a/task/", {"action": "retry_selected", "_selected_action": [task.pk]}
        )
    assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED
    assert agent.told == []
    [args] = queued
    tasks.tell_owed_cancel(*args)  # as a worker runs it
    assert agent.told == [("r-1", "agent-one", TaskState.SUBMITTED)]
    told = Task.objects.get(pk=task.pk).metadata["retries"][-1]["remoteCancel"]
    assert (told["taskId"], told["state"]) == ("r-1", "TASK_STATE_CANCELED")


@pytest.mark.django_db(transaction=True)
def test_a_list_retry_stands_when_the_cancel_cannot_be_queued(
    admin_client: Any, task: Task, monkeypatch: Any
) -> None:
    """The broker is down: the retry was committed, and the operator got a 500 for it
    (the rest of the selection not retried)."""
    old_agent(monkeypatch, OldAgent(task))
    timed_out(task)

    def down(*args: Any) -> None:
        raise kombu.exceptions.OperationalError("Error 111 connecting to redis")

    monkeypatch.setattr(tasks.tell_owed_cancel, "delay", down)
    response = admin_client.post(
        "/admin/a2a/task/", {"action": "retry_selected", "_selected_action": [task.pk]}
    )
    assert response.status_code == 302
    assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED
