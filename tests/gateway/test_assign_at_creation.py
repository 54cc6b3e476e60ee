"""A task for an agent that works over the gateway only reaches its socket on the
creation's commit: no worker runs here, so the frame can only come from creation."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import batch, creation
from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_a_new_task_goes_out_on_commit_without_a_worker(
    agent: AgentProfile, make_user: Any
) -> None:
    user = await db_async(make_user)()
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    task: Task = await db_async(creation.create_task)(
        skill_id="ce-review", input={"product": "kettle"}, user=user
    )
    assert task.transport == Transport.WEBSOCKET
    frame = await client.recv(wait=2)
    assert frame["type"] == "task.assign"
    assert frame["task"]["id"] == str(task.id)
    assert frame["message"]["parts"][0]["data"] == {"product": "kettle"}
    delivery = await db_async(Delivery.objects.get)(pk=frame["deliveryId"])
    assert delivery.status == DeliveryStatus.SENT
    await client.close()


async def test_a_batch_reaches_the_socket_in_order(agent: AgentProfile, make_user: Any) -> None:
    user = await db_async(make_user)()
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(5)]
    outcomes = await db_async(batch.create_tasks)(requests, user=user)
    frames = [await client.recv(wait=2) for _ in outcomes]
    assert [f["task"]["id"] for f in frames] == [str(o.task.id) for o in outcomes if o.task]
    await client.close()


async def test_an_offline_agent_gets_its_task_when_it_connects(
    agent: AgentProfile, make_user: Any
) -> None:
    user = await db_async(make_user)()
    task: Task = await db_async(creation.create_task)(
        skill_id="ce-review", input={"product": "kettle"}, user=user
    )
    assert task.transport == Transport.OFFLINE
    client = await open_client(agent.raw_key)
    frame = await client.recv(wait=2)
    assert frame["task"]["id"] == str(task.id)
    await db_async(task.refresh_from_db)()
    assert task.transport == Transport.WEBSOCKET
    await client.close()
