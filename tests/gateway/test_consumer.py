"""The gateway consumer on the real ASGI app (WebsocketCommunicator): auth, heartbeats,
bad frames, pushes, acks, redelivery and ownership."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from gateway import presence, services
from gateway.models import Delivery, DeliveryStatus, Presence
from tests.gateway.conftest import db_async, open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def ping_pong(client: Any) -> None:
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}


# --- auth ------------------------------------------------------------------------------


async def test_it_accepts_a_bearer_header_and_answers_ping(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await client.close()


async def test_it_accepts_an_auth_frame(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key, auth_frame=True)
    await ping_pong(client)
    assert await db_async(presence.is_online)(agent.id)
    await client.close()


async def test_it_closes_4401_for_a_bad_key_header(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key + "x")
    assert (await client.recv())["type"] == "error"
    assert await client.closed_with() == 4401


async def test_it_closes_4401_for_a_non_bearer_header(agent: AgentProfile) -> None:
    from channels.testing import WebsocketCommunicator

    from platform_site.asgi import application

    comm = WebsocketCommunicator(
        application, "/ws/agent-gateway/", headers=[(b"authorization", b"Basic abc")]
    )
    await comm.connect()
    await comm.receive_json_from()
    assert (await comm.receive_output())["code"] == 4401
    await comm.disconnect()


async def test_it_closes_4401_for_a_bad_auth_frame(agent: AgentProfile) -> None:
    client = await open_client("a2a_deadbeef_nope", auth_frame=True)
    assert await client.closed_with() == 4401


async def test_it_closes_4401_when_the_first_frame_is_not_auth(agent: AgentProfile) -> None:
    client = await open_client()
    await client.send({"type": "ping"})
    assert await client.closed_with() == 4401


async def test_it_closes_4401_when_the_first_frame_is_not_json(agent: AgentProfile) -> None:
    client = await open_client()
    await client.send("not json")
    assert await client.closed_with() == 4401


@override_settings(GATEWAY_AUTH_TIMEOUT=0.2)
async def test_it_closes_4401_when_no_auth_frame_arrives_in_time(agent: AgentProfile) -> None:
    client = await open_client()
    assert await client.closed_with() == 4401


async def test_it_closes_4403_for_a_disabled_agent(agent: AgentProfile) -> None:
    await db_async(AgentProfile.objects.filter(pk=agent.pk).update)(status=AgentStatus.DISABLED)
    client = await open_client(agent.raw_key)
    assert await client.closed_with() == 4403
    client = await open_client(agent.raw_key, auth_frame=True)
    assert await client.closed_with() == 4403


async def test_it_closes_the_connections_of_an_agent_disabled_meanwhile(
    agent: AgentProfile,
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)

    def disable() -> None:
        agent.status = AgentStatus.DISABLED
        agent.save()

    await db_async(disable)()
    assert await client.closed_with() == 4403


async def test_it_refuses_a_user_token(make_user: Callable[..., Any], agent: AgentProfile) -> None:
    user = await db_async(make_user)()
    client = await open_client(user.raw_token)
    assert await client.closed_with() == 4401


# --- heartbeats and presence -----------------------------------------------------------


async def test_it_records_presence_and_forgets_it_on_disconnect(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    rows = await db_async(lambda: list(Presence.objects.filter(agent=agent)))()
    assert len(rows) == 1
    assert rows[0].server_id == presence.SERVER_ID
    assert await db_async(presence.online_agent_ids)() == {agent.id}
    await client.close()
    assert not await db_async(presence.is_online)(agent.id)


@override_settings(GATEWAY_HEARTBEAT_TIMEOUT=0.3)
async def test_it_closes_connections_that_stay_silent(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    assert await client.closed_with(wait=5) == 4408
    assert not await db_async(Presence.objects.filter(agent=agent).exists)()


# --- bad frames ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        ("[1, 2]", "invalid_frame"),
        ({"type": "task.explode"}, "unknown_type"),
        ({"no": "type"}, "unknown_type"),
        ({"type": "task.ack"}, "missing_field"),
        ({"type": "task.ack", "deliveryId": "nope"}, "unknown_delivery"),
        ({"type": "task.update", "taskId": "x"}, "missing_field"),
        ({"type": "task.update", "taskId": "x", "status": {"state": 1}}, "missing_field"),
        (
            {"type": "task.update", "taskId": "x", "status": {"state": "s"}, "artifacts": 3},
            "invalid_frame",
        ),
        ({"type": "auth", "apiKey": "again"}, "already_authenticated"),
    ],
)
async def test_it_answers_bad_frames_with_an_error_and_stays_open(
    agent: AgentProfile, frame: Any, code: str
) -> None:
    client = await open_client(agent.raw_key)
    await client.send(frame)
    reply = await client.recv()
    assert reply["type"] == "error"
    assert reply["code"] == code
    assert reply["message"]
    await ping_pong(client)
    await client.close()


@override_settings(GATEWAY_MAX_FRAME_BYTES=1000)
async def test_it_refuses_a_huge_frame(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping", "pad": "x" * 2000})
    assert (await client.recv())["code"] == "frame_too_large"
    await ping_pong(client)
    await client.close()


@override_settings(GATEWAY_BAD_FRAME_LIMIT=3)
async def test_it_closes_a_flood_of_bad_frames(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    for _ in range(4):
        await client.send("{{{")
    assert await client.closed_with() == 4429


async def test_it_refuses_updates_for_another_agents_task(
    make_agent: Callable[..., AgentProfile], skill: Skill, make_task: Callable[..., Task]
) -> None:
    other = await db_async(make_agent)(id="agent-two", skills=[skill])
    theirs = await db_async(make_task)(agent=other, transport=Transport.WEBSOCKET)
    intruder = await db_async(make_agent)(id="agent-three", skills=[skill])
    client = await open_client(intruder.raw_key)
    await client.send(
        {"type": "task.update", "taskId": str(theirs.id), "status": {"state": "TASK_STATE_FAILED"}}
    )
    assert (await client.recv())["code"] == "task_not_found"
    for unknown in ("nope", str(uuid.uuid4())):
        await client.send(
            {"type": "task.update", "taskId": unknown, "status": {"state": "TASK_STATE_FAILED"}}
        )
        assert (await client.recv())["code"] == "task_not_found"
    await client.close()
    assert (await db_async(Task.objects.get)(pk=theirs.pk)).state == "TASK_STATE_SUBMITTED"


async def test_it_refuses_updates_for_a_task_served_over_http(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)(transport=Transport.A2A)
    client = await open_client(agent.raw_key)
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": "TASK_STATE_WORKING"}}
    )
    assert (await client.recv())["code"] == "not_gateway_task"
    await client.close()


async def test_it_refuses_acks_of_another_agents_delivery(
    make_agent: Callable[..., AgentProfile], skill: Skill, make_task: Callable[..., Task]
) -> None:
    other = await db_async(make_agent)(id="agent-two", skills=[skill])
    task = await db_async(make_task)(agent=other)
    await db_async(services.push_task)(task)
    delivery = await db_async(Delivery.objects.get)(task=task)
    intruder = await db_async(make_agent)(id="agent-three", skills=[skill])
    client = await open_client(intruder.raw_key)
    await client.send({"type": "task.ack", "deliveryId": str(delivery.id)})
    assert (await client.recv())["code"] == "unknown_delivery"
    await client.close()


# --- pushes, acks and redelivery --------------------------------------------------------


def assign_of(frame: dict[str, Any], task: Task) -> None:
    assert frame["type"] == "task.assign"
    assert frame["skillId"] == task.skill_id
    assert frame["task"]["id"] == str(task.id)
    assert frame["task"]["contextId"] == "ctx-1"
    assert frame["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    message = frame["message"]
    assert message["role"] == "ROLE_USER"
    assert message["metadata"]["skillId"] == task.skill_id
    assert {"data": {"product": "kettle"}} in message["parts"] or any(
        part.get("data") == {"product": "kettle"} for part in message["parts"]
    )


async def test_it_pushes_to_an_online_agent_and_records_the_ack(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    task = await db_async(make_task)()
    assert await db_async(services.push_task)(task) == "websocket"
    frame = await client.recv()
    assign_of(frame, task)
    delivery = await db_async(Delivery.objects.get)(pk=frame["deliveryId"])
    assert delivery.status == DeliveryStatus.SENT
    await client.send({"type": "task.ack", "deliveryId": frame["deliveryId"]})
    await ping_pong(client)  # the ack was handled before the ping
    delivery = await db_async(Delivery.objects.get)(pk=frame["deliveryId"])
    assert delivery.status == DeliveryStatus.ACKED
    assert delivery.acked_at is not None
    # Acking twice is harmless.
    await client.send({"type": "task.ack", "deliveryId": frame["deliveryId"]})
    await ping_pong(client)
    await client.close()
    # An acked delivery is not sent again.
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await client.close()


async def test_it_resends_an_unacked_assignment_on_the_next_connection(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    task = await db_async(make_task)()
    await db_async(services.push_task)(task)
    first = await client.recv()
    await client.close()  # dropped before the ack

    client = await open_client(agent.raw_key)
    again = await client.recv()
    assert again == first
    await client.send({"type": "task.ack", "deliveryId": again["deliveryId"]})
    await ping_pong(client)
    await client.close()
    delivery = await db_async(Delivery.objects.get)(pk=first["deliveryId"])
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.ACKED, 2)


async def test_it_delivers_offline_tasks_oldest_first_on_connect(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    tasks = [await db_async(make_task)() for _ in range(3)]
    for task in tasks:
        assert await db_async(services.push_task)(task) == "offline"
    assert (await db_async(Task.objects.get)(pk=tasks[0].pk)).transport == Transport.OFFLINE

    client = await open_client(agent.raw_key)
    received = [await client.recv() for _ in tasks]
    assert [f["task"]["id"] for f in received] == [str(t.id) for t in tasks]
    assert await client.silent()
    await client.close()
    assert (await db_async(Task.objects.get)(pk=tasks[0].pk)).transport == Transport.WEBSOCKET


async def test_it_sends_a_delivery_once_to_one_of_two_connections(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    first, second = await open_client(agent.raw_key), await open_client(agent.raw_key)
    await ping_pong(first)
    await ping_pong(second)
    task = await db_async(make_task)()
    await db_async(services.push_task)(task)
    got_first = not await first.silent(0.5)
    got_second = not await second.silent(0.5)
    assert got_first != got_second
    await first.close()
    await second.close()


async def test_it_pushes_replies_and_cancels_as_frames(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    assign = await client.recv()
    await client.send({"type": "task.ack", "deliveryId": assign["deliveryId"]})
    reply = {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "yes"}]}
    await db_async(services.send_followup)(task, "message", reply)
    frame = await client.recv()
    assert (frame["type"], frame["taskId"]) == ("task.message", str(task.id))
    assert frame["message"] == {**reply, "taskId": str(task.id), "contextId": "ctx-1"}
    await db_async(services.send_followup)(task, "cancel", None)
    frame = await client.recv()
    assert (frame["type"], frame["taskId"]) == ("task.cancel", str(task.id))
    await client.close()


async def test_a_pending_assignment_of_a_canceled_task_is_never_sent(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)()
    await db_async(services.push_task)(task)
    assert await db_async(services.send_followup)(task, "cancel", None) == "withdrawn"
    await db_async(task.cancel)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)  # nothing came before the pong
    await client.close()


async def test_frames_are_compact_json(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    raw = await client.comm.receive_from()
    assert json.loads(raw) == {"type": "pong"}
    await client.close()
