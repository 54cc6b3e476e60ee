"""A frame larger than a WebSocket message may be (``gateway.frames.MAX_SENT_BYTES``,
daphne's limit) never reaches the agent: its task fails ``frame_too_large`` instead of
waiting, SUBMITTED, for nothing (daphne refused the send, and the consumer logged it at
DEBUG). Non-ASCII text goes as itself, not as ``\\u`` escapes (up to six times its size)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from a2a import creation
from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from gateway import frames
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

# An input whose frame is just over the limit (MAX_BODY_BYTES keeps the REST API's under
# it; the platform's own callers, or an operator's larger MAX_BODY_BYTES, can pass it).
TOO_BIG = {"product": "lamp", "notes": "a" * frames.MAX_SENT_BYTES}


def test_non_ascii_text_goes_as_itself() -> None:
    text, size = frames.encode({"type": "task.assign", "t": "文🛋"})
    assert text == '{"type":"task.assign","t":"文🛋"}'
    assert size == len(text.encode())
    # A lone surrogate (refused on the way in) cannot be UTF-8: escaped, it still goes.
    text, size = frames.encode({"t": "\ud800"})
    assert (text, size) == ('{"t":"\\ud800"}', len(text))


async def _failed(task: Task, wait: float = 5.0) -> Task:
    """``task`` once it failed (the hint reaches the socket through the channel layer:
    with Redis, in its own time), or as it is after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        await db_async(task.refresh_from_db)()
        if task.state == TaskState.FAILED or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.05)


async def test_an_assignment_too_large_to_send_fails_its_task(
    agent: AgentProfile, make_user: Any
) -> None:
    user = await db_async(make_user)()
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    task: Task = await db_async(creation.create_task)(
        skill_id="ce-review", input=TOO_BIG, user=user
    )
    task = await _failed(task)
    assert await client.silent()  # no task.assign came
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "frame_too_large"
    assert task.error["details"]["maxBytes"] == frames.MAX_SENT_BYTES
    assert task.error["details"]["bytes"] > frames.MAX_SENT_BYTES
    assert "cannot be delivered" in task.error["message"]
    delivery = await db_async(Delivery.objects.get)(task=task)
    assert (delivery.status, delivery.closed_reason) == (
        DeliveryStatus.CANCELED,
        "frame too large",
    )
    # The connection goes on: a task of a normal size still reaches it.
    small: Task = await db_async(creation.create_task)(
        skill_id="ce-review", input={"product": "kettle"}, user=user
    )
    frame = await client.recv(wait=2)
    assert (frame["type"], frame["task"]["id"]) == ("task.assign", str(small.id))
    await client.close()


async def test_an_offline_assignment_too_large_fails_when_the_agent_connects(
    agent: AgentProfile, make_user: Any
) -> None:
    user = await db_async(make_user)()
    task: Task = await db_async(creation.create_task)(
        skill_id="ce-review", input=TOO_BIG, user=user
    )
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    task = await _failed(task)
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "frame_too_large")
    assert (
        await sync_to_async(
            Delivery.objects.filter(task=task, status__in=["pending", "sent"]).exists
        )()
        is False
    )
    await client.close()
