"""The fallback from A2A HTTP to the gateway, and follow-ups of gateway tasks, through the
dispatcher's seams (``handle_send_failure``, ``deliver_followup``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a import agent_updates, creation, send_failures
from a2a import services as a2a_services
from a2a.exceptions import A2APermanentError, A2ATransientError
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from agent_profiles.matching import match_agent
from agent_profiles.models import AgentProfile, Skill
from gateway import presence
from gateway.models import Delivery, DeliveryKind, DeliveryStatus, OfflineTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def http_agent(make_agent: Callable[..., AgentProfile], skill: Skill) -> AgentProfile:
    return make_agent(id="http-agent", skills=[skill], a2a_endpoint="http://127.0.0.1:9/")


@pytest.fixture
def user(make_user: Callable[..., Any]) -> Any:
    return make_user()


def create(agent: AgentProfile, user: Any) -> Task:
    return creation.create_task(
        skill_id="ce-review", input={"product": "lamp"}, agent_id=agent.id, user=user
    )


def test_an_agent_without_endpoint_is_served_by_the_gateway_directly(
    agent: AgentProfile, user: Any
) -> None:
    task = create(agent, user)
    send_failures.handle_send_failure(task, A2APermanentError("no endpoint", code="no_endpoint"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
    assert not task.metadata.get("fallbacks")
    offline = OfflineTask.objects.get(task=task)
    assert offline.payload["message"] == task.outbound_message


def test_an_online_agent_gets_the_task_on_its_socket_at_the_first_failure(
    http_agent: AgentProfile, user: Any
) -> None:
    presence.register(http_agent.id, "chan-1")
    task = create(http_agent, user)
    send_failures.handle_send_failure(task, A2ATransientError("refused", code="agent_unreachable"))
    task.refresh_from_db()
    assert (task.transport, task.next_action) == (Transport.WEBSOCKET, NextAction.NONE)
    (fallback,) = task.metadata["fallbacks"]
    assert fallback["to"] == "websocket"
    assert fallback["reason"].startswith("agent_unreachable")


def test_an_offline_agent_is_retried_over_http_first(http_agent: AgentProfile, user: Any) -> None:
    task = create(http_agent, user)
    send_failures.handle_send_failure(task, A2ATransientError("refused", code="agent_unreachable"))
    task.refresh_from_db()
    assert (task.transport, task.next_action) == (Transport.A2A, NextAction.SEND)
    assert not Delivery.objects.exists()


def test_replies_and_cancels_of_gateway_tasks_go_as_frames(agent: AgentProfile, user: Any) -> None:
    task = create(agent, user)
    send_failures.handle_send_failure(task, A2APermanentError("no endpoint", code="no_endpoint"))
    task.refresh_from_db()
    Delivery.objects.update(status=DeliveryStatus.ACKED)  # the agent got it
    agent_updates.apply_agent_update(
        task,
        status={
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Where?"}]},
        },
        via="websocket",
    )
    a2a_services.reply_to_task(task, text="France")
    reply = Delivery.objects.get(kind=DeliveryKind.MESSAGE)
    message = reply.payload["message"]
    assert reply.payload["taskId"] == str(task.id)
    assert message["parts"][0] == {"text": "France"}
    assert message["taskId"] == str(task.id)
    a2a_services.cancel_task(task)
    cancel = Delivery.objects.get(kind=DeliveryKind.CANCEL)
    assert cancel.payload == {
        "type": "task.cancel",
        "taskId": str(task.id),
        "deliveryId": str(cancel.id),
    }


def test_canceling_a_task_the_agent_never_received_withdraws_it(
    agent: AgentProfile, user: Any
) -> None:
    task = create(agent, user)
    send_failures.handle_send_failure(task, A2APermanentError("no endpoint", code="no_endpoint"))
    task.refresh_from_db()
    a2a_services.cancel_task(task)
    assert not Delivery.objects.filter(kind=DeliveryKind.CANCEL).exists()
    assert Delivery.objects.get().status == DeliveryStatus.CANCELED


def test_a_failed_reply_to_an_http_task_moves_it_to_the_gateway_as_a_message(
    http_agent: AgentProfile, user: Any
) -> None:
    task = create(http_agent, user)
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_INPUT_REQUIRED"},
        remote={"id": "remote-1", "contextId": "rctx"},
        via="a2a",
    )
    a2a_services.reply_to_task(task, text="France")
    task.refresh_from_db()
    send_failures.handle_send_failure(task, A2APermanentError("gone", status=404))
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    assert not Delivery.objects.filter(kind=DeliveryKind.ASSIGN).exists()
    message = Delivery.objects.get(kind=DeliveryKind.MESSAGE).payload["message"]
    assert (message["taskId"], message["contextId"]) == ("remote-1", "rctx")
    assert "HTTP 404" in task.metadata["fallbacks"][0]["reason"]


def test_matching_prefers_an_agent_online_on_the_gateway(
    make_agent: Callable[..., AgentProfile], skill: Skill
) -> None:
    make_agent(id="agent-a", skills=[skill], a2a_endpoint="")
    online = make_agent(id="agent-b", skills=[skill], a2a_endpoint="")
    presence.register(online.id, "chan-b")
    chosen, _scores = match_agent(skill)
    assert chosen.id == "agent-b"
