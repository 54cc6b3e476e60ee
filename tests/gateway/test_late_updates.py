"""A ``task.update`` for a task that already ended answers ``invalid_state`` and changes
nothing, unless it repeats the task's final state (a CANCELED answering a cancel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a import services as a2a_services
from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, holding, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

GOOD = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]


async def update(client: Any, task: Task, state: str, artifacts: Any = None) -> list[Any]:
    """Send the update and a ping; the frames answered before the pong."""
    frame: dict[str, Any] = {
        "type": "task.update",
        "taskId": str(task.id),
        "status": {"state": state},
    }
    if artifacts is not None:
        frame["artifacts"] = artifacts
    await client.send(frame)
    await client.send({"type": "ping"})
    answered = []
    while (received := await client.recv()) != {"type": "pong"}:
        answered.append(received)
    return answered


async def test_a_late_update_after_completion_is_refused_and_changes_nothing(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """docs/gateway.md promises invalid_state "for example the task already ended"; a
    late FAILED with answers never validated was accepted silently."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    assert await update(client, task, "TASK_STATE_COMPLETED", GOOD) == []
    bad = [{"artifactId": "b", "parts": [{"data": {"verdict": "maybe", "extra": 1}}]}]
    answered = await update(client, task, "TASK_STATE_FAILED", bad)
    await client.close()
    assert [(f["type"], f["code"]) for f in answered] == [("error", "invalid_state")]
    done = await db_async(Task.objects.get)(pk=task.pk)
    assert (done.state, done.output, done.artifacts) == (
        "TASK_STATE_COMPLETED",
        {"verdict": "pass"},
        GOOD,
    )


async def test_a_completion_after_the_task_failed_is_refused(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """A COMPLETED after the offline TTL (or the deadline) failed the task."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    await db_async(task.fail)("offline_expired", "Agent agent-one did not acknowledge it.")
    client = await open_client(agent.raw_key)
    answered = await update(client, task, "TASK_STATE_COMPLETED", GOOD)
    await client.close()
    assert [f["code"] for f in answered] == ["invalid_state"]
    failed = await db_async(Task.objects.get)(pk=task.pk)
    assert (failed.state, failed.error["code"], failed.output) == (
        "TASK_STATE_FAILED",
        "offline_expired",
        None,
    )


async def test_repeating_the_final_state_is_accepted(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """A duplicate of the final update (a resend after a reconnect) is not an error."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    assert await update(client, task, "TASK_STATE_COMPLETED", GOOD) == []
    assert await update(client, task, "TASK_STATE_COMPLETED", GOOD) == []
    await client.close()


async def test_a_canceled_answer_to_a_cancel_is_accepted_and_acknowledges_it(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = await db_async(make_task)()
    client, _ = await holding(agent.raw_key, task)
    await db_async(a2a_services.cancel_task)(await db_async(Task.objects.get)(pk=task.pk))
    cancel = await client.recv()
    assert cancel["type"] == "task.cancel"
    assert await update(client, task, "TASK_STATE_CANCELED") == []
    await client.close()
    row = await db_async(Delivery.objects.get)(pk=cancel["deliveryId"])
    assert row.status == DeliveryStatus.ACKED


async def test_another_answer_to_a_cancel_is_refused_but_acknowledges_it(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The agent finished just before the cancel: its COMPLETED is not taken (the task
    was canceled), and the cancel it answers is not sent again."""
    task = await db_async(make_task)()
    client, _ = await holding(agent.raw_key, task)
    await db_async(a2a_services.cancel_task)(await db_async(Task.objects.get)(pk=task.pk))
    cancel = await client.recv()
    answered = await update(client, task, "TASK_STATE_COMPLETED", GOOD)
    await client.close()
    assert [f["code"] for f in answered] == ["invalid_state"]
    row = await db_async(Delivery.objects.get)(pk=cancel["deliveryId"])
    assert row.status == DeliveryStatus.ACKED
    assert (await db_async(Task.objects.get)(pk=task.pk)).state == "TASK_STATE_CANCELED"


async def test_late_answers_of_many_ended_tasks_do_not_close_the_connection(
    agent: AgentProfile, make_task: Callable[..., Task], settings: Any
) -> None:
    """Tasks that ended at their deadline together, then answered by the agent: each is
    told invalid_state, but they are no bad frames, and the connection the agent uses for
    its other tasks stays open (it was closed 4429 past GATEWAY_BAD_FRAME_LIMIT)."""
    settings.GATEWAY_BAD_FRAME_LIMIT = 3
    tasks = []
    for _ in range(5):
        task = await db_async(make_task)(transport=Transport.WEBSOCKET)
        await db_async(task.fail)("timeout", "Timed out.")
        tasks.append(task)
    client = await open_client(agent.raw_key)
    for task in tasks:
        answered = await update(client, task, "TASK_STATE_COMPLETED", GOOD)
        assert [f["code"] for f in answered] == ["invalid_state"]
    await ping_pong(client)  # still open: it answers
    await client.close()
