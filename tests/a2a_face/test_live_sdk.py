"""End to end: the official a2a-sdk client against the live platform, with a real a2a-sdk
agent registered behind it. Slow (boots processes): few tests, each covering a lot."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from tests.a2a_face.conftest import EXTENDED_TOKEN
from tests.a2a_face.webhook import Webhook

WORKING = pb.TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = pb.TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = pb.TaskState.TASK_STATE_COMPLETED
CANCELED = pb.TaskState.TASK_STATE_CANCELED


def message(behaviour: str, **data: Any) -> pb.Message:
    return ParseDict(
        {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"product": "lamp", "behaviour": behaviour, **data}}],
            "metadata": {"skillId": "ce-review"},
        },
        pb.Message(),
    )


def reply_to(task: pb.Task, **data: Any) -> pb.Message:
    msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.Role.ROLE_USER)
    msg.task_id, msg.context_id = task.id, task.context_id
    msg.parts.add().data.struct_value.update(data)
    return msg


@asynccontextmanager
async def sdk_client(
    base: str, token: str, binding: str, *, streaming: bool = False
) -> AsyncIterator[tuple[Client, pb.AgentCard]]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    try:
        card = await A2ACardResolver(http, base).get_agent_card()
        config = ClientConfig(
            httpx_client=http, supported_protocol_bindings=[binding], streaming=streaming
        )
        yield ClientFactory(config).create(card), card
    finally:
        await http.aclose()


async def send(client: Client, msg: pb.Message, *, now: bool = False) -> pb.Task:
    request = pb.SendMessageRequest(message=msg)
    request.configuration.return_immediately = now
    events = [event async for event in client.send_message(request)]
    assert events[-1].HasField("task")
    return events[-1].task


async def wait_state(client: Client, task_id: str, state: int) -> pb.Task:
    deadline = time.monotonic() + 30
    while True:
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        if task.status.state == state or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.1)


async def collect(stream: AsyncIterator[pb.StreamResponse]) -> list[dict[str, Any]]:
    return [MessageToDict(event) async for event in stream]


def states(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        if "task" in event:
            out.append(event["task"]["status"]["state"])
        elif "statusUpdate" in event:
            out.append(event["statusUpdate"]["status"]["state"])
    return out


async def the_protocol_scenario(world: dict[str, Any], binding: str) -> None:
    url, alice = world["url"], world["alice"]
    async with sdk_client(url, alice, binding) as (client, card):
        wanted = f"{url}/v1/a2a" + ("/jsonrpc" if binding == "JSONRPC" else "")
        assert wanted in [i.url for i in card.supported_interfaces]
        assert card.capabilities.streaming
        assert card.capabilities.push_notifications

        # Blocking send: the answer is the finished task with the agent's artifacts.
        done = await send(client, message("complete"))
        assert done.status.state == COMPLETED
        assert MessageToDict(done.artifacts[0])["parts"][0]["data"] == {"verdict": "pass"}
        assert done.history[0].parts[0].data.struct_value["behaviour"] == "complete"

        # Non-blocking send, then get.
        quick = await send(client, message("slow", seconds=0.5), now=True)
        assert quick.status.state in (pb.TaskState.TASK_STATE_SUBMITTED, WORKING)
        assert (await wait_state(client, quick.id, COMPLETED)).status.state == COMPLETED

        # INPUT_REQUIRED round trip: the agent's question, the client's answer.
        asked = await send(client, message("ask"))
        assert asked.status.state == INPUT_REQUIRED
        assert asked.status.message.parts
        answered = await send(client, reply_to(asked, answer="EU"))
        assert answered.id == asked.id
        assert answered.status.state == COMPLETED

        # Cancel a task the agent keeps working on.
        busy = await send(client, message("working"), now=True)
        await wait_state(client, busy.id, WORKING)
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=busy.id))
        assert canceled.status.state == CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(pb.CancelTaskRequest(id=busy.id))

        # List with paging: newest first, every task once.
        seen: list[str] = []
        token = ""
        while True:
            page = await client.list_tasks(pb.ListTasksRequest(page_size=2, page_token=token))
            assert page.total_size == 4
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted([done.id, quick.id, asked.id, busy.id])

        # Terminal tasks take no more messages and no subscriptions.
        with pytest.raises(UnsupportedOperationError):
            await send(client, reply_to(done, more="no"))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(pb.GetTaskRequest(id=str(uuid.uuid4())))

        # A client that accepts text alone gets the agent's data as JSON text.
        request = pb.SendMessageRequest(message=message("complete"))
        request.configuration.accepted_output_modes.append("text/plain")
        texts = [event async for event in client.send_message(request)][-1].task
        assert texts.status.state == COMPLETED
        assert json.loads(texts.artifacts[0].parts[0].text) == {"verdict": "pass"}

    # Streaming send: the Task first, then updates, closed after the final state.
    async with (
        sdk_client(url, alice, binding, streaming=True) as (streamer, _),
        sdk_client(url, alice, binding) as (client, _),
    ):
        request = pb.SendMessageRequest(message=message("slow", seconds=0.3))
        events = await collect(streamer.send_message(request))
        assert "task" in events[0]
        assert states(events)[-1] == "TASK_STATE_COMPLETED"
        assert any("artifactUpdate" in e for e in events)

        # A streaming send ends once the task asks: the client's turn (as a2a-sdk's own
        # servers do; clients such as ADK's wait for the stream's end). The answer goes
        # by a new streaming send, which starts from the task and streams to its end.
        request = pb.SendMessageRequest(message=message("ask"))
        events = await asyncio.wait_for(collect(streamer.send_message(request)), 30)
        assert states(events)[-1] == "TASK_STATE_INPUT_REQUIRED"
        question = await client.get_task(pb.GetTaskRequest(id=events[0]["task"]["id"]))
        request = pb.SendMessageRequest(message=reply_to(question, answer="EU"))
        events = await asyncio.wait_for(collect(streamer.send_message(request)), 30)
        assert events[0]["task"]["id"] == question.id
        assert "TASK_STATE_INPUT_REQUIRED" not in states(events)
        assert states(events)[-1] == "TASK_STATE_COMPLETED"

        with pytest.raises(UnsupportedOperationError):
            await collect(streamer.subscribe(pb.SubscribeToTaskRequest(id=done.id)))

        # Two subscribers at once get the same events in the same order; the streams
        # stay open through INPUT_REQUIRED and close after the final state.
        asked = await send(client, message("ask"))
        subscribe = pb.SubscribeToTaskRequest(id=asked.id)
        subs = [asyncio.ensure_future(collect(streamer.subscribe(subscribe))) for _ in range(2)]
        await asyncio.sleep(1.0)  # both subscriptions are open (their first event is sent)
        await send(client, reply_to(asked, answer="EU"), now=True)
        one, two = await asyncio.wait_for(asyncio.gather(*subs), 30)
        assert one == two
        assert states(one)[0] == "TASK_STATE_INPUT_REQUIRED"
        assert states(one)[-1] == "TASK_STATE_COMPLETED"

    # Isolation: another caller sees none of it.
    async with sdk_client(url, world["bob"], binding) as (bob, _):
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(pb.GetTaskRequest(id=done.id))
        assert (await bob.list_tasks(pb.ListTasksRequest())).total_size == 0


@pytest.mark.slow
@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
def test_the_sdk_client_uses_the_platform_as_an_agent(world: dict[str, Any], binding: str) -> None:
    asyncio.run(the_protocol_scenario(world, binding))


async def the_tenant_and_card_scenario(world: dict[str, Any], webhook: Webhook) -> None:
    url, alice, agent = world["url"], world["alice"], world["agent"]
    # Tenant routes: the agent's own card points at /v1/a2a/{agentId}.
    async with sdk_client(f"{url}/v1/a2a/{agent.id}", alice, "HTTP+JSON") as (tenant, card):
        assert card.supported_interfaces[0].url == f"{url}/v1/a2a/{agent.id}"
        task = await send(tenant, message("complete"))
        assert task.status.state == COMPLETED
        assert task.metadata["agentId"] == agent.id

        # Push notification to a local webhook, with the config's auth and token.
        asked = await send(tenant, message("ask"))
        config = pb.TaskPushNotificationConfig(task_id=asked.id, url=webhook.url, token="tok-9")
        config.authentication.scheme = "Bearer"
        config.authentication.credentials = "hook-secret"
        stored = await tenant.create_task_push_notification_config(config)
        assert stored.id
        await send(tenant, reply_to(asked, answer="EU"))
        await asyncio.to_thread(webhook.wait_for_state, "TASK_STATE_COMPLETED", 20)
        headers, body = webhook.received[-1]
        assert body["task"]["id"] == asked.id
        assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert headers["Authorization"] == "Bearer hook-secret"
        assert headers["X-A2A-Notification-Token"] == "tok-9"

    # The extended card: declared, served to the card's own scheme (a user's token) and
    # to its token, refused to anyone else.
    for token in (EXTENDED_TOKEN, alice):
        async with sdk_client(url, token, "HTTP+JSON") as (ext, card):
            assert card.capabilities.extended_agent_card
            extended = await ext.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
            assert extended.name == card.name
    async with sdk_client(url, "not-a-token", "HTTP+JSON") as (stranger, _):
        with pytest.raises(A2AClientError):
            await stranger.get_extended_agent_card(pb.GetExtendedAgentCardRequest())


@pytest.mark.slow
def test_tenant_routes_push_notifications_and_the_extended_card(world: dict[str, Any]) -> None:
    webhook = Webhook()
    try:
        asyncio.run(the_tenant_and_card_scenario(world, webhook))
    finally:
        webhook.close()


@pytest.mark.slow
@pytest.mark.distributed
def test_streams_and_push_follow_updates_applied_by_a_worker(world: dict[str, Any]) -> None:
    """daphne serves the stream; the Celery worker process applies the agent's updates and
    POSTs the push notifications."""

    async def scenario(webhook: Webhook) -> None:
        async with sdk_client(world["url"], world["alice"], "HTTP+JSON", streaming=True) as (
            client,
            _,
        ):
            request = pb.SendMessageRequest(message=message("slow", seconds=0.5))
            push = request.configuration.task_push_notification_config
            push.url, push.token = webhook.url, "tok-d"
            events = await collect(client.send_message(request))
            assert states(events)[0] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
            assert states(events)[-1] == "TASK_STATE_COMPLETED"
        await asyncio.to_thread(webhook.wait_for_state, "TASK_STATE_COMPLETED", 20)
        headers, body = webhook.received[-1]
        assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert headers["X-A2A-Notification-Token"] == "tok-d"

    webhook = Webhook()
    try:
        asyncio.run(scenario(webhook))
    finally:
        webhook.close()
