"""``task.update`` frames drive the one state machine shared with A2A polling; platform
faults answer ``internal_error`` without dropping the socket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile
from gateway import services, sessions
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def update(client: Any, task: Task, state: str, **extra: Any) -> None:
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": state}, **extra}
    )
    await ping_pong(client)  # the update was applied before the pong


async def test_updates_drive_the_task_to_completion(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    assign = await client.recv()
    await update(client, task, "TASK_STATE_WORKING")
    assert (await db_async(Task.objects.get)(pk=task.pk)).state == "TASK_STATE_WORKING"
    # The update acknowledged the assignment.
    delivery = await db_async(Delivery.objects.get)(pk=assign["deliveryId"])
    assert delivery.status == DeliveryStatus.ACKED
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]
    await update(client, task, "TASK_STATE_COMPLETED", artifacts=artifacts)
    done = await db_async(Task.objects.get)(pk=task.pk)
    assert (done.state, done.output) == ("TASK_STATE_COMPLETED", {"verdict": "pass"})
    await client.close()


async def test_an_invalid_output_fails_the_task(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "maybe"}}]}]
    await update(client, task, "TASK_STATE_COMPLETED", artifacts=artifacts)
    done = await db_async(Task.objects.get)(pk=task.pk)
    assert (done.state, done.error["code"]) == ("TASK_STATE_FAILED", "output_invalid")
    await client.close()


async def test_a_question_waits_for_a_person(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}
    await client.send(
        {
            "type": "task.update",
            "taskId": str(task.id),
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        }
    )
    await ping_pong(client)
    waiting = await db_async(Task.objects.get)(pk=task.pk)
    assert (waiting.state, waiting.question) == ("TASK_STATE_INPUT_REQUIRED", question)
    await client.close()


async def test_a_second_question_while_waiting_is_the_one_shown(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The agent asks again while the task already waits: the person must see (and
    answer) the question asked now, not the first one."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    for message_id, text in (("q1", "EU or UK?"), ("q2", "Which voltage?")):
        question = {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}
        status = {"state": "TASK_STATE_INPUT_REQUIRED", "message": question}
        await client.send({"type": "task.update", "taskId": str(task.id), "status": status})
        await ping_pong(client)
    waiting = await db_async(Task.objects.get)(pk=task.pk)
    await client.close()
    assert (waiting.state, waiting.question["messageId"]) == ("TASK_STATE_INPUT_REQUIRED", "q2")


async def test_an_unknown_state_gets_an_error_frame(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": "DANCING"}}
    )
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "not_a2a")
    await ping_pong(client)
    await client.close()


async def test_a_platform_fault_answers_internal_error_and_keeps_the_socket(
    agent: AgentProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("database is gone")

    monkeypatch.setattr(sessions, "ack", broken)
    client = await open_client(agent.raw_key)
    await client.send({"type": "task.ack", "deliveryId": "6f1c6f1c-6f1c-4f1c-8f1c-6f1c6f1c6f1c"})
    assert (await client.recv())["code"] == "internal_error"
    await ping_pong(client)
    await client.close()
