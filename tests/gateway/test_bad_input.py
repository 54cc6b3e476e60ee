"""Bad frames on the gateway: an ``error`` frame naming the field and the socket stays;
an agent's answer holding a NUL or a lone surrogate fails its task once as
``output_invalid``. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.models import Task
from agent_profiles.models import AgentProfile
from gateway import services
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"type": "ping", "x": "a\\u0000b"}', "invalid_text"),
        ('{"type": "task.ack", "deliveryId": "\\ud800"}', "invalid_text"),
        ('{"type": "task.update", "taskId": "a\\u0000", "status": {"state": "x"}}', "invalid_text"),
        ('{"type": "ping", "x": ' + DEEP + "}", "json_too_deep"),
        (DEEP, "json_too_deep"),
        ('{"type": "ping", "x": NaN}', "invalid_json"),
        ('{"type": "ping", "x": -1e999}', "invalid_json"),
        ('{"type": "p\\u0000ing"}', "invalid_text"),
    ],
)
async def test_a_bad_frame_gets_an_error_frame_and_the_socket_stays(
    agent: AgentProfile, raw: str, code: str
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await client.send(raw)
    error = await client.recv()
    assert (error["type"], error["code"]) == ("error", code), error
    await ping_pong(client)
    await client.close()


async def test_the_error_frame_names_the_field(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await client.send('{"type": "ping", "meta": {"k": ["ok", "a\\u0000"]}}')
    error = await client.recv()
    assert "meta.k[1]" in error["message"]
    await client.close()


async def test_a_bad_auth_frame_closes_4401_without_a_crash(agent: AgentProfile) -> None:
    client = await open_client(auth_frame=True)
    await client.send('{"type": "auth", "apiKey": "a2a_\\u0000\\u0000\\u0000\\u0000_x"}')
    assert await client.closed_with() == 4401


async def test_a_nul_key_in_the_header_closes_4401(agent: AgentProfile) -> None:
    client = await open_client("a2a_0000000\x00_secret")
    assert await client.closed_with() == 4401


@pytest.mark.parametrize(
    "answer",
    [
        {"artifacts": [{"artifactId": "a", "parts": [{"data": {"verdict": "pa\u0000ss"}}]}]},
        {"artifacts": [{"artifactId": "a", "parts": [{"text": "x\udcffy"}]}]},
    ],
)
async def test_an_answer_with_bad_text_fails_the_task_once(
    agent: AgentProfile, make_task: Callable[..., Task], answer: dict[str, Any]
) -> None:
    import json

    task = await db_async(make_task)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    assign = await client.recv()
    frame = {
        "type": "task.update",
        "taskId": str(task.id),
        "status": {"state": "TASK_STATE_COMPLETED"},
    }
    await client.send(json.dumps({**frame, **answer}))
    await ping_pong(client)
    failed = await db_async(Task.objects.get)(pk=task.pk)
    assert failed.state == "TASK_STATE_FAILED"
    assert failed.error["code"] == "output_invalid"
    assert failed.error["details"]["field"].startswith("artifacts[0].parts[0]")
    assert failed.artifacts in (None, [])
    assert failed.attempts <= 1
    delivery = await db_async(Delivery.objects.get)(pk=assign["deliveryId"])
    assert delivery.status != DeliveryStatus.PENDING
    # Nothing is sent again: the socket stays quiet.
    assert await client.silent(0.3)
    await client.close()


async def test_a_status_message_with_a_nul_fails_the_task(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    await client.recv()
    message = {"role": "ROLE_AGENT", "messageId": "m1", "parts": [{"text": "a\u0000"}]}
    status = {"state": "TASK_STATE_INPUT_REQUIRED", "message": message}
    await client.send({"type": "task.update", "taskId": str(task.id), "status": status})
    await ping_pong(client)
    failed = await db_async(Task.objects.get)(pk=task.pk)
    assert (failed.state, failed.error["code"]) == ("TASK_STATE_FAILED", "output_invalid")
    assert failed.error["details"]["field"] == "status.message.parts[0].text"
    await client.close()


async def test_an_answer_with_a_number_beyond_a_float_is_refused_and_changes_nothing(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """1e400 is Python's infinity and PostgreSQL's jsonb refuses it: the frame was taken,
    failed at the database (``internal_error``) and left the assignment acked and the task
    SUBMITTED. It is refused as not JSON now, before anything is written."""
    task = await db_async(make_task)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    assign = await client.recv()
    await client.send(
        '{"type": "task.update", "taskId": "ID", "status": {"state": "TASK_STATE_COMPLETED"},'
        ' "artifacts": [{"artifactId": "a", "parts": [{"data": {"x": 1e400}}]}]}'.replace(
            "ID", str(task.id)
        )
    )
    error = await client.recv()
    assert (error["type"], error["code"]) == ("error", "invalid_json"), error
    unchanged = await db_async(Task.objects.get)(pk=task.pk)
    assert (unchanged.state, unchanged.artifacts) == (task.state, task.artifacts)
    delivery = await db_async(Delivery.objects.get)(pk=assign["deliveryId"])
    assert delivery.status == DeliveryStatus.SENT  # still owed: sent again on reconnect
    await client.close()


async def test_a_flood_of_valid_frames_closes_the_connection(
    agent: AgentProfile, settings: Any
) -> None:
    """Valid frames count too: one agent sending pings as fast as it could filled the
    server's queue for its socket faster than it was read (300 MB that stayed) and stalled
    every other client. Past the burst and the rate it is told why and closed (4429); what
    it sent after that is dropped unread."""
    settings.GATEWAY_FRAME_RATE = 1
    settings.GATEWAY_FRAME_BURST = 5
    client = await open_client(agent.raw_key)
    for _ in range(30):
        await client.send({"type": "ping"})
    answers: list[dict[str, Any]] = []
    while len(answers) < 6:
        answers.append(await client.recv())
    assert [a["type"] for a in answers[:5]] == ["pong"] * 5
    assert (answers[5]["type"], answers[5]["code"]) == ("error", "too_many_frames")
    assert await client.closed_with() == 4429


async def test_frames_within_the_rate_are_served(agent: AgentProfile, settings: Any) -> None:
    settings.GATEWAY_FRAME_RATE = 1000
    settings.GATEWAY_FRAME_BURST = 50
    client = await open_client(agent.raw_key)
    for _ in range(40):
        await client.send({"type": "ping"})
    for _ in range(40):
        assert (await client.recv())["type"] == "pong"
    await client.close()


async def test_an_agents_connections_past_the_limit_are_refused_until_one_closes(
    agent: AgentProfile, settings: Any
) -> None:
    """Each new connection is sent all the agent's owed deliveries: 500 sockets of one
    agent owed 60 made every other agent's connect wait 17 s."""
    settings.GATEWAY_MAX_CONNECTIONS_PER_AGENT = 2
    first, second = await open_client(agent.raw_key), await open_client(agent.raw_key)
    await ping_pong(first)
    await ping_pong(second)
    third = await open_client(agent.raw_key)
    refused = await third.recv()
    assert (refused["type"], refused["code"]) == ("error", "too_many_connections")
    assert await third.closed_with() == 4429
    await first.close()
    fourth = await open_client(agent.raw_key)  # a slot came free
    await ping_pong(fourth)
    await ping_pong(second)
    for client in (second, fourth):
        await client.close()
