"""A ``task.cancel`` (or ``task.message``) is not sent forever: the agent's answer to the
cancel of a task taken from it acknowledges it, and unacknowledged ones expire at the
offline TTL without failing anything."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from a2a import reassign
from a2a import services as a2a_services
from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile, Skill
from gateway import offline, services
from gateway.models import Delivery, DeliveryKind, DeliveryStatus
from tests.gateway.conftest import db_async, holding, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _long_past(task: Task, kind: str) -> None:
    """Queue the task's ``kind`` deliveries 30 days ago, expired a day later."""
    past = timezone.now() - timedelta(days=30)
    Delivery.objects.filter(task=task, kind=kind).update(
        queued_at=past, created_at=past, expires_at=past + timedelta(days=1)
    )


async def test_an_unacked_cancel_does_not_outlive_the_offline_ttl(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """Only assignments expired: a cancel the agent never acks was sent on every one of
    its connections, long after OFFLINE_TASK_TTL."""
    task = await db_async(make_task)()
    client, _ = await holding(agent.raw_key, task)
    await client.close()
    await db_async(a2a_services.cancel_task)(await db_async(Task.objects.get)(pk=task.pk))

    await db_async(_long_past)(task, DeliveryKind.CANCEL)
    assert await db_async(offline.expire_offline_tasks)() == 1
    cancel = await db_async(Delivery.objects.get)(task=task, kind=DeliveryKind.CANCEL)
    assert cancel.status == DeliveryStatus.EXPIRED
    client = await open_client(agent.raw_key)
    await ping_pong(client)  # the pong comes first: no task.cancel any more
    await client.close()
    assert (await db_async(Task.objects.get)(pk=task.pk)).state == "TASK_STATE_CANCELED"


async def test_answering_the_cancel_of_a_reassigned_task_acknowledges_it(
    agent: AgentProfile, skill: Skill, make_task: Callable[..., Task], make_agent: Callable
) -> None:
    """The task is no longer the agent's, so its CANCELED answer (as docs/gateway.md asks)
    was refused with task_not_found before the ack, and the cancel came back forever."""
    other = await db_async(make_agent)(skills=[skill], id="agent-two", a2a_endpoint="")
    task = await db_async(make_task)()
    client, _ = await holding(agent.raw_key, task)
    await db_async(reassign.reassign_task)(
        await db_async(Task.objects.get)(pk=task.pk), agent_id=other.id
    )
    cancel = await client.recv()
    assert cancel["type"] == "task.cancel"
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": "TASK_STATE_CANCELED"}}
    )
    await ping_pong(client)  # no error frame before the pong
    await client.close()
    row = await db_async(Delivery.objects.get)(pk=cancel["deliveryId"])
    assert row.status == DeliveryStatus.ACKED
    moved = await db_async(Task.objects.get)(pk=task.pk)
    assert (moved.agent_id, moved.state) == ("agent-two", "TASK_STATE_SUBMITTED")
    client = await open_client(agent.raw_key)
    await ping_pong(client)  # nothing owed any more
    await client.close()


async def test_another_update_of_a_task_taken_from_the_agent_is_not_found(
    agent: AgentProfile, skill: Skill, make_task: Callable[..., Task], make_agent: Callable
) -> None:
    """Only a CANCELED answers the cancel; anything else about a task that is another
    agent's now is refused as before (and acknowledges the agent's own frames)."""
    other = await db_async(make_agent)(skills=[skill], id="agent-two", a2a_endpoint="")
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    await db_async(services.send_followup)(task, "cancel")
    await db_async(Task.objects.filter(pk=task.pk).update)(agent=other)
    client = await open_client(agent.raw_key)
    cancel = await client.recv()
    assert cancel["type"] == "task.cancel"
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": "TASK_STATE_WORKING"}}
    )
    error = await client.recv()
    assert (error["type"], error["code"]) == ("error", "task_not_found")
    await client.close()
    row = await db_async(Delivery.objects.get)(pk=cancel["deliveryId"])
    assert row.status == DeliveryStatus.ACKED


def test_an_expired_cancel_fails_nothing(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """A cancel past its expiry closes (an agent that never acks it is not sent it on
    each of its connections forever); its task is left as it is."""
    task = make_task(transport=Transport.WEBSOCKET, state="TASK_STATE_WORKING")
    services.send_followup(task, "cancel")
    _long_past(task, DeliveryKind.CANCEL)
    assert offline.expire_offline_tasks() == 1
    row = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    assert (row.status, row.closed_reason) == (DeliveryStatus.EXPIRED, "offline TTL passed")
    task.refresh_from_db()
    assert task.state == "TASK_STATE_WORKING"


def test_an_expired_reply_fails_its_task_as_an_assignment_does(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """An offline task is outside the deadline sweep: left to it, a task whose reply
    expired would wait for good, with nothing more to deliver."""
    task = make_task(transport=Transport.OFFLINE, state="TASK_STATE_WORKING")
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "France"}]}
    services.send_followup(task, "message", message)
    _long_past(task, DeliveryKind.MESSAGE)
    assert offline.expire_offline_tasks() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == ("TASK_STATE_FAILED", "offline_expired")
    assert "the reply to its question was never delivered" in task.error["message"]


def test_withdrawing_an_agents_assignment_leaves_another_agents_cancel(
    agent: AgentProfile, skill: Skill, make_task: Callable[..., Task], make_agent: Callable
) -> None:
    """Reassigned A to B (A's cancel pending), then B to C before B connected: B's pending
    assignment is withdrawn, and A must still hear of the cancel."""
    task = make_task(transport=Transport.OFFLINE)
    services.send_followup(task, "cancel")  # A's, pending: A is offline
    b = make_agent(skills=[skill], id="agent-b", a2a_endpoint="")
    Task.objects.filter(pk=task.pk).update(agent=b)
    task.refresh_from_db()
    services.push_task(task)  # B's assignment, pending
    assert services.send_followup(task, "cancel") == "withdrawn"
    a_cancel = Delivery.objects.get(task=task, agent_id=agent.id, kind=DeliveryKind.CANCEL)
    assert a_cancel.status == DeliveryStatus.PENDING


def test_an_expired_assignment_of_a_task_taken_from_its_agent_fails_nothing(
    agent: AgentProfile, skill: Skill, make_task: Callable[..., Task], make_agent: Callable
) -> None:
    """The task goes on at its new agent: the old agent's leftover assignment expiring
    must not fail it with offline_expired."""
    task = make_task()
    services.push_task(task)
    other = make_agent(skills=[skill], id="agent-two", a2a_endpoint="")
    Task.objects.filter(pk=task.pk).update(agent=other)
    _long_past(task, DeliveryKind.ASSIGN)
    before = Task.objects.get(pk=task.pk).state
    assert offline.expire_offline_tasks() == 1
    task.refresh_from_db()
    assert (task.state, task.error) == (before, None)
