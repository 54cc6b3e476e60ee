"""A ``task.update`` or ``task.ack`` read while the gateway's kept database connection is
dead (the database restarted under it) is applied on a new connection, not refused.

The gateway's threads keep their connections (:mod:`gateway.db`) and check only those that
failed before: the first frame after a PostgreSQL restart met the dead one and was answered
``internal_error``. An agent that had acked its assignment (so it is never sent again) and
did not send its COMPLETED again left the task SUBMITTED for good (a Redis + PostgreSQL
restart hunt, 2 runs of 9).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.db import OperationalError, connection
from django.test import override_settings

from a2a import agent_updates
from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from gateway import offline, presence, services, sessions
from gateway.db import close_pool, db
from gateway.models import Delivery, DeliveryStatus
from tests.gateway.conftest import db_async, holding, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def one_gateway_thread() -> Iterator[None]:
    """One database thread: the connection killed is the one the next frame uses."""
    with override_settings(GATEWAY_DB_THREADS=1):
        close_pool()  # sized at its first call
        yield


COMPLETED = {"state": "TASK_STATE_COMPLETED"}
ARTIFACTS = [{"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}]


def completed(task: Task) -> dict[str, Any]:
    return {
        "type": "task.update",
        "taskId": str(task.id),
        "status": COMPLETED,
        "artifacts": ARTIFACTS,
    }


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def terminate(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        return bool(cursor.fetchone()[0])


async def kill_gateway_connection() -> None:
    """What a PostgreSQL restart does to the gateway thread's kept connection: it dies,
    and nothing tells the thread until it uses it."""
    assert await db_async(terminate)(await db(backend_pid)())


def state_of(task: Task) -> str:
    return str(Task.objects.get(pk=task.pk).state)


async def completed_soon(task: Task) -> bool:
    """Whether the task is COMPLETED within three seconds (its update is applied on the
    consumer's own time)."""
    for _ in range(60):
        if await db_async(state_of)(task) == TaskState.COMPLETED:
            return True
        await asyncio.sleep(0.05)
    return await db_async(state_of)(task) == TaskState.COMPLETED


async def test_an_update_after_a_database_restart_is_applied(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a server restart kills connections; SQLite has none (see the next test)")
    task = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, task)
    await kill_gateway_connection()  # acked before: never sent again
    await client.send(completed(task))
    await ping_pong(client)  # no internal_error before the pong: the update was stored
    assert await db_async(state_of)(task) == TaskState.COMPLETED
    await client.close()


async def test_an_update_failing_on_a_dead_connection_is_applied_on_a_new_one(
    agent: AgentProfile, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any backend: the connection dies in the middle of the update."""
    task = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, task)
    real = agent_updates.apply_agent_update
    calls: list[str] = []

    def dies_once(*args: Any, **kwargs: Any) -> Task:
        calls.append(connection.alias)
        if len(calls) == 1:
            connection.close()  # as a lost server leaves it: no usable connection
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(agent_updates, "apply_agent_update", dies_once)
    await client.send(completed(task))
    await ping_pong(client)
    assert len(calls) == 2
    assert await db_async(state_of)(task) == TaskState.COMPLETED
    await client.close()


async def test_an_ack_on_a_dead_connection_is_stored(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a server restart kills connections; SQLite has none")
    task = await db_async(make_task)()
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(services.push_task)(task)
    assign = await client.recv()
    await kill_gateway_connection()
    await client.send({"type": "task.ack", "deliveryId": assign["deliveryId"]})
    await ping_pong(client)
    status = await db_async(lambda: Delivery.objects.get(pk=assign["deliveryId"]).status)()
    assert status == DeliveryStatus.ACKED
    await client.close()


async def test_an_error_of_a_live_database_is_not_retried(
    agent: AgentProfile, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that answered (a lock timeout, say) would fail the same way again, after
    as long a wait: the agent hears ``internal_error`` at once and sends it again later."""
    task = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, task)
    calls: list[int] = []

    def locked(*args: Any, **kwargs: Any) -> Task:
        calls.append(1)
        raise OperationalError("database is locked")

    monkeypatch.setattr(agent_updates, "apply_agent_update", locked)
    await client.send(completed(task))
    error = await client.recv()
    assert (error["type"], error["code"]) == ("error", "internal_error")
    assert calls == [1]
    assert await db_async(state_of)(task) == TaskState.SUBMITTED
    await client.close()


async def test_a_failed_claim_keeps_the_socket_and_the_frames_behind_it(
    agent: AgentProfile, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The push of a new task met the dead connection first (a Redis + PostgreSQL restart
    hunt): the claim raised out of the hint's handler, daphne closed the socket with 1011,
    and the COMPLETED frames the agent had sent meanwhile were dropped unread. The row
    stays pending; the sweep's next hint delivers it."""
    held = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, held)
    real = sessions.claim_pending
    calls: list[str] = []

    def dies_once(*args: Any) -> bool:
        calls.append(str(args[0]))
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args)

    monkeypatch.setattr(sessions, "claim_pending", dies_once)
    pushed = await db_async(make_task)()
    await db_async(services.push_task)(pushed)  # its hint's claim fails
    await client.send(completed(held))
    await ping_pong(client)  # the socket is open and the update was handled
    assert calls
    assert await db_async(state_of)(held) == TaskState.COMPLETED
    delivery = await db_async(lambda: Delivery.objects.get(task_id=pushed.pk))()
    assert delivery.status == DeliveryStatus.PENDING
    with override_settings(GATEWAY_SWEEP_INTERVAL=0):  # no grace for a fresh hint
        await db_async(offline.renotify_pending)()  # what the sweep does
    assign = await client.recv()
    assert (assign["type"], assign["deliveryId"]) == ("task.assign", str(delivery.pk))
    await client.close()


async def test_a_push_and_an_update_after_a_database_restart(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The hunt's order on PostgreSQL: the database restarts, a new task's push reaches the
    socket first, then the agent's COMPLETED of the task it holds."""
    if connection.vendor != "postgresql":
        pytest.skip("a server restart kills connections; SQLite has none")
    held = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, held)
    await kill_gateway_connection()
    pushed = await db_async(make_task)()
    await db_async(services.push_task)(pushed)
    await client.send(completed(held))
    await client.send({"type": "ping"})
    frames = [await client.recv()]
    while frames[-1]["type"] != "pong":  # the assignment may come first (or later)
        frames.append(await client.recv())
    assert all(frame["type"] != "error" for frame in frames), frames
    assert await db_async(state_of)(held) == TaskState.COMPLETED
    await client.close()


async def test_frames_read_before_a_close_are_applied_after_it(
    agent: AgentProfile, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daphne still hands over frames it read while the socket was closing (1013 when
    Redis failed, say), and refuses any answer once it closed: the refused pong raised out
    of the handler, and the COMPLETED read behind the ping was never applied."""
    task = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, task)
    closed: set[int] = set()
    real_close, real_send = AsyncWebsocketConsumer.close, AsyncWebsocketConsumer.send

    async def close(self: Any, *args: Any, **kwargs: Any) -> None:
        closed.add(id(self))
        await real_close(self, *args, **kwargs)

    async def send(self: Any, *args: Any, **kwargs: Any) -> None:
        if id(self) in closed:  # as daphne's protocol does once the socket closed
            raise RuntimeError("Attempt to send on a closed protocol")
        await real_send(self, *args, **kwargs)

    monkeypatch.setattr(AsyncWebsocketConsumer, "close", close)
    monkeypatch.setattr(AsyncWebsocketConsumer, "send", send)
    group = presence.agent_group(agent.id)
    await get_channel_layer().group_send(group, {"type": "gateway.close", "code": 4401})
    assert (await client.recv())["code"] == "unauthorized"
    assert (await client.comm.receive_output(timeout=3))["type"] == "websocket.close"
    await client.send({"type": "ping"})  # read while closing: its pong cannot go out
    await client.send(completed(task))
    assert await completed_soon(task)
    await client.close()


async def test_frames_read_before_the_agents_own_close_are_applied_after_it(
    agent: AgentProfile, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent closes its socket right after its last frames (a ping, its COMPLETED):
    daphne refuses every send from the close on, the pong's refusal raised out of the
    handler, and the COMPLETED behind it was never applied (the task stuck, sent again on
    the next connection)."""
    task = await db_async(make_task)()
    client, _assign = await holding(agent.raw_key, task)
    peer_closed = False
    real_send = AsyncWebsocketConsumer.send

    async def send(self: Any, *args: Any, **kwargs: Any) -> None:
        if peer_closed:  # as daphne's protocol does once the agent's close came
            raise RuntimeError("Attempt to send on a closed protocol")
        await real_send(self, *args, **kwargs)

    monkeypatch.setattr(AsyncWebsocketConsumer, "send", send)
    peer_closed = True
    await client.send({"type": "ping"})  # its pong cannot go out
    await client.send(completed(task))
    assert await completed_soon(task)
    await client.close()
