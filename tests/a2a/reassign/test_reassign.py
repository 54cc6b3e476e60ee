"""Reassigning a waiting, offline or failed task to another active agent of its skill
(``POST /api/tasks/{id}/reassign`` and ``a2a.reassign.reassign_task``)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a import send_failures
from a2a.exceptions import A2APermanentError
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from gateway.models import Delivery, DeliveryStatus
from tests.a2a.test_api import client_for

pytestmark = pytest.mark.django_db


def reassign(api: APIClient, task: Task, **body: Any) -> Any:
    return api.post(f"/api/tasks/{task.pk}/reassign", body, format="json")


def test_a_failed_task_goes_to_the_agent_named(api: APIClient, task: Task) -> None:
    task.fail("agent_failed", "Agent 'agent-one': broke")
    response = reassign(api, task, agentId="agent-two")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["agentId"], body["state"], body["error"]) == (
        "agent-two",
        TaskState.SUBMITTED,
        None,
    )
    task.refresh_from_db()
    assert (task.next_action, task.transport, task.attempts) == (NextAction.SEND, "a2a", 0)
    moved = task.metadata["reassignments"][0]
    assert (moved["from"], moved["to"], moved["previousState"]) == (
        "agent-one",
        "agent-two",
        TaskState.FAILED,
    )
    assert moved["previousError"]["code"] == "agent_failed"
    last = task.events.order_by("-at", "-id").first()
    assert "reassigned" in last.reason
    assert "agent-two" in last.reason


def test_without_an_agent_the_matcher_picks_another(api: APIClient, task: Task) -> None:
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    assert response.json()["agentId"] == "agent-two"
    task.refresh_from_db()
    assert task.metadata["match"]["chosenBy"] == "reassign"


def test_a_task_offline_at_the_old_agent_is_withdrawn_there(api: APIClient, task: Task) -> None:
    send_failures.handle_send_failure(task, A2APermanentError("HTTP 404", status=404))
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    assert reassign(api, task, agentId="agent-two").status_code == 200
    delivery = Delivery.objects.get(task=task)
    assert (delivery.agent_id, delivery.status) == ("agent-one", DeliveryStatus.CANCELED)
    task.refresh_from_db()
    assert (task.agent_id, task.transport) == ("agent-two", Transport.A2A)
    assert task.metadata["reassignments"][0]["gateway"] == "withdrawn"


@pytest.mark.parametrize(
    ("agent_id", "code"),
    [("agent-one", "unknown_agent"), ("nobody", "unknown_agent")],
)
def test_the_same_or_an_unknown_agent_is_refused(
    api: APIClient, task: Task, agent_id: str, code: str
) -> None:
    response = reassign(api, task, agentId=agent_id)
    assert (response.status_code, response.json()["error"]["code"]) == (400, code)
    task.refresh_from_db()
    assert task.agent_id == "agent-one"


def test_no_other_agent_for_the_skill_is_a_400(api: APIClient, task: Task, two: Any) -> None:
    two[1].skills.clear()
    response = reassign(api, task)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "no_agent")


def test_a_completed_or_canceled_task_is_not_reassigned(api: APIClient, task: Task) -> None:
    task.cancel("by a test")
    response = reassign(api, task, agentId="agent-two")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "invalid_state")


def test_a_bad_body_is_a_400_and_changes_nothing(api: APIClient, task: Task) -> None:
    response = reassign(api, task, agentId=["agent-two"])
    assert response.status_code == 400
    task.refresh_from_db()
    assert task.agent_id == "agent-one"


def test_another_users_task_is_not_found(task: Task, make_user: Any) -> None:
    other = client_for(make_user("bob"))
    assert reassign(other, task, agentId="agent-two").status_code == 404


def test_a_gateway_session_marks_the_agent_as_one_that_uses_the_gateway(two: Any) -> None:
    from gateway import sessions

    agent = two[0]
    assert agent.gateway_seen_at is None
    sessions.start_session(agent, "channel-1", "127.0.0.1")
    agent.refresh_from_db()
    assert agent.gateway_seen_at is not None
