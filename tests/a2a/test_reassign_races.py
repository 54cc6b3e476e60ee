"""A person's reassign racing the platform: the worker's send answered, the agent asking,
the old agent reporting the cancel it was told. The task is reassigned from the state it
is in now (refused only once it finished), and the old agent is told only after the move
committed, so its report is another attempt's and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a import reassign as reassign_module
from a2a import services
from a2a.models import Direction, Task, TaskMessage
from a2a.states import NextAction, TaskState
from a2a.transports import AgentReply
from tests.a2a.helpers import working
from tests.a2a.test_api import client_for

pytestmark = pytest.mark.django_db

QUESTION = {"messageId": "q-1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}


@pytest.fixture
def two(make_agent: Any, skill: Any) -> tuple[Any, Any]:
    return (
        make_agent(skills=[skill]),
        make_agent(skills=[skill], id="agent-two", a2a_endpoint="http://127.0.0.1:9/two"),
    )


@pytest.fixture
def task(skill: Any, two: Any, user: Any) -> Task:
    return services.create_task(
        skill_id=skill.id, input={"product": "lamp"}, agent_id="agent-one", user=user
    )


@pytest.fixture
def api(user: Any) -> APIClient:
    return client_for(user)


class OldAgent:
    """The old agent's A2A transport: records the cancels it is told, and what the row
    was when told; ``then`` runs as the agent answers (its report of the cancel)."""

    def __init__(self, task: Task, then: Callable[[str], None] | None = None) -> None:
        self.task, self.then = task, then
        self.told: list[tuple[str, str, str]] = []

    def cancel(self, remote_id: str, timeout: float = 0.0) -> Any:
        row = Task.objects.get(pk=self.task.pk)
        self.told.append((remote_id, row.agent_id, row.state))
        if self.then is not None:
            self.then(remote_id)
        return AgentReply(task={"id": remote_id, "status": {"state": "TASK_STATE_CANCELED"}})


def old_agent(monkeypatch: Any, agent: OldAgent) -> OldAgent:
    monkeypatch.setattr(reassign_module.agent_registry, "target_for", lambda a: None)
    monkeypatch.setattr(reassign_module.transports, "transport_for", lambda target: agent)
    return agent


def meanwhile(monkeypatch: Any, move: Callable[[Task], Any]) -> None:
    """Between the reassign's read of the task (the view's) and its write, the platform
    moves it: done as the new agent is chosen (its queries are that window)."""
    choose = reassign_module._new_agent

    def chosen(task: Task, agent_id: str | None) -> Any:
        picked = choose(task, agent_id)
        move(Task.objects.get(pk=task.pk))  # another process's copy of the row
        return picked

    monkeypatch.setattr(reassign_module, "_new_agent", chosen)


def reassign(api: APIClient, task: Task) -> Any:
    return api.post(f"/api/tasks/{task.pk}/reassign", {"agentId": "agent-two"}, format="json")


def test_a_task_the_agent_started_meanwhile_is_reassigned(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """Read SUBMITTED; the worker's send was answered WORKING before the write."""
    agent = old_agent(monkeypatch, OldAgent(task))
    meanwhile(monkeypatch, working)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.next_action) == (
        "agent-two",
        TaskState.SUBMITTED,
        NextAction.SEND,
    )
    moved = task.metadata["reassignments"][-1]
    # What the task was when it was moved, not when it was first read.
    assert (moved["previousState"], moved["previousRemoteTaskId"]) == (TaskState.WORKING, "r-1")
    # Its agent task was started meanwhile: the old agent is told to drop that one.
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    assert moved["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}
    assert response.json()["metadata"]["reassignments"][-1]["remoteCancel"]


def test_a_task_whose_agent_asked_meanwhile_is_reassigned(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """Read WORKING; the agent asked a question (a state a reassign is also allowed
    from) before the write."""
    old_agent(monkeypatch, OldAgent(task))
    working(task)
    meanwhile(
        monkeypatch,
        lambda row: services.apply_agent_update(
            row, status={"state": "input-required", "message": QUESTION}, via="a2a"
        ),
    )
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.question) == ("agent-two", TaskState.SUBMITTED, None)
    assert task.metadata["reassignments"][-1]["previousState"] == TaskState.INPUT_REQUIRED


def test_a_task_that_finished_meanwhile_is_refused_and_its_agent_not_told(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    agent = old_agent(monkeypatch, OldAgent(task))
    working(task)
    meanwhile(monkeypatch, lambda row: row.complete({"verdict": "pass"}, []))
    sent = TaskMessage.objects.filter(task=task, direction=Direction.TO_AGENT).count()
    response = reassign(api, task)
    assert (response.status_code, response.json()["error"]["code"]) == (409, "invalid_state")
    assert "only waiting, offline or failed tasks" in response.json()["error"]["message"]
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-one", TaskState.COMPLETED)
    assert "reassignments" not in task.metadata
    # A refused reassign has no side effect: no cancel, no new first message.
    assert agent.told == []
    assert TaskMessage.objects.filter(task=task, direction=Direction.TO_AGENT).count() == sent


def test_the_old_agents_report_of_its_cancel_does_not_undo_the_reassign(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """The old agent is told to cancel and reports the cancel at once: the worker that
    was polling it applies the answer to the task as it read it (WORKING at agent-one).
    The move was made before the old agent heard of it, so that is stale news."""
    working(task)
    polled = Task.objects.get(pk=task.pk)  # the worker's copy, read before the reassign

    def reports(remote_id: str) -> None:
        services.apply_agent_reply(
            polled,
            task_json={"id": remote_id, "status": {"state": "TASK_STATE_CANCELED"}},
            message=None,
            via="a2a",
        )

    agent = old_agent(monkeypatch, OldAgent(task, then=reports))
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.remote_task_id) == (
        "agent-two",
        TaskState.SUBMITTED,
        "",
    )
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    assert task.metadata["reassignments"][-1]["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}


def test_a_later_reassign_keeps_its_own_entry(
    api: APIClient, task: Task, two: Any, make_agent: Any, skill: Any, monkeypatch: Any
) -> None:
    """While the old agent is told, another person reassigns the task again: what the
    first telling gave is not written on the second move's entry."""
    make_agent(skills=[skill], id="agent-three", a2a_endpoint="http://127.0.0.1:9/three")
    working(task)

    def moved_again(remote_id: str) -> None:
        monkeypatch.setattr(reassign_module.transports, "transport_for", lambda t: OldAgent(task))
        services.reassign_task(Task.objects.get(pk=task.pk), agent_id="agent-three", by="ops")

    old_agent(monkeypatch, OldAgent(task, then=moved_again))
    assert reassign(api, task).status_code == 200
    task.refresh_from_db()
    first, second = task.metadata["reassignments"]
    assert (first["to"], second["to"], task.agent_id) == ("agent-two", "agent-three", "agent-three")
    # The first telling ended after the second move: its answer (agent-one's task
    # canceled) belongs to no entry still the task's, and agent-two had no agent task.
    assert "remoteCancel" not in first
    assert "remoteCancel" not in second


def test_an_unexpected_error_telling_the_old_agent_keeps_the_reassign(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    working(task)

    def unreadable(agent: Any) -> Any:
        raise RuntimeError("credential unreadable")

    monkeypatch.setattr(reassign_module.agent_registry, "target_for", unreadable)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-two", TaskState.SUBMITTED)
    told = task.metadata["reassignments"][-1]["remoteCancel"]
    assert told["error"]["code"] == "internal_error"
