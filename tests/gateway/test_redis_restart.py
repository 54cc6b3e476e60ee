"""A quick Redis restart under open gateway sockets: every agent still gets its work.

Redis keeps nothing across a restart here, so every channel-layer group membership
(``asgi:group:gw.<agent>``) is gone. In channels_redis 4 all consumers of a daphne share
one receive lock and only its holder reads from Redis: only that one (or a few) saw the
error and closed with 1013, so the agent reconnected and joined its group again. The others
never noticed, stayed open in no group and were re-joined only after an hour: their
pushes, and every re-hint of the sweep, went to an empty group, and their tasks failed
``timeout`` without ever being sent. Now the next heartbeat tick re-joins every live
connection of the process and has it read its outbox, when a receive failed or when Redis
lost the process's own key (a restart no receive noticed).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any
from unittest import mock

import httpx
import pytest
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from a2a.models import Task
from agent_profiles.models import AgentProfile, Skill
from gateway import presence, services
from gateway.connections import local, marker_key
from gateway.models import Presence
from tests.gateway.conftest import Client, db_async, open_client
from tests.support.processes import RedisServer, daphne_process, redis_server
from tests.support.socket_close import TRY_AGAIN

AGENTS = 12  # one daphne: all their consumers share its one receive lock
# A heartbeat tick a second: the tick is where a process notices the lost memberships.
ENV = {"GATEWAY_HEARTBEAT_TIMEOUT": 3.0, "LOG_LEVEL": "WARNING"}
# From the restart; far past one tick, far below the task's deadline (A2A_TASK_TIMEOUT):
# only a delivery that never comes fails.
PATIENCE = 12.0


async def started(agent: AgentProfile) -> tuple[Client, str]:
    """A connection of ``agent`` whose session started, and its channel name."""
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    rows = Presence.objects.filter(agent_id=agent.id).values_list("channel_name", flat=True)
    return client, await db_async(rows.get)()


async def push(make_task: Callable[..., Task], context_id: str) -> Task:
    """A task pushed to the agent (its hint goes to the agent's group)."""
    task = await db_async(make_task)(context_id=context_id)
    assert await db_async(services.push_task)(task) == "websocket"
    return task


class Agent:
    """A well-behaved agent: one socket, pings, reconnects when the server closes it."""

    def __init__(self, ws_url: str, key: str) -> None:
        self.ws_url, self.key = ws_url, key
        self.close_codes: list[int | None] = []
        self.assigned: set[str] = set()
        self._sockets = ExitStack()
        self.ws: ClientConnection | None = self._connect()

    def _connect(self) -> ClientConnection:
        headers = {"Authorization": f"Bearer {self.key}"}
        ws = connect(self.ws_url, additional_headers=headers, open_timeout=10, close_timeout=1)
        return self._sockets.enter_context(ws)

    def pump(self, wait: float = 0.05) -> None:
        """Ping, and read what comes for ``wait`` seconds; reconnect if it was closed."""
        if self.ws is None:
            try:
                self.ws = self._connect()
            except (OSError, InvalidHandshake):  # tried again at the next pump
                return
        try:
            self.ws.send('{"type":"ping"}')
            deadline = time.monotonic() + wait
            while (left := deadline - time.monotonic()) > 0:
                try:
                    frame = json.loads(self.ws.recv(timeout=left))
                except TimeoutError:
                    return
                if frame["type"] == "task.assign":
                    self.assigned.add(frame["task"]["id"])
                    self.ws.send(
                        json.dumps({"type": "task.ack", "deliveryId": frame["deliveryId"]})
                    )
        except ConnectionClosed as closed:
            self.close_codes.append(closed.rcvd.code if closed.rcvd else None)
            self.ws = None

    def close(self) -> None:
        self._sockets.close()


def create_tasks(base: str, token: str, skill_id: str, agent_ids: list[str]) -> dict[str, str]:
    """One task for each agent, through the API; the task id of each agent."""
    tasks = {}
    for agent_id in agent_ids:
        answer = httpx.post(
            f"{base}/api/tasks",
            json={"skillId": skill_id, "input": {"product": "kettle"}, "agentId": agent_id},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert answer.status_code == 201, answer.text
        tasks[agent_id] = answer.json()["id"]
    return tasks


def delivered(agents: dict[str, Agent], tasks: dict[str, str]) -> bool:
    return all(tasks[agent_id] in agent.assigned for agent_id, agent in agents.items())


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.mark.distributed
@pytest.mark.slow
def test_open_sockets_get_their_work_after_a_quick_redis_restart(
    transactional_db: None,
    redis: RedisServer,
    make_user: Callable[..., Any],
    make_skill: Callable[..., Skill],
    make_agent: Callable[..., AgentProfile],
) -> None:
    token = make_user().raw_token
    skill = make_skill()
    profiles = [make_agent(id=f"agent-{i}", skills=[skill], a2a_endpoint="") for i in range(AGENTS)]
    with daphne_process(REDIS_URL=redis.url, **ENV) as proc:
        base = proc.url  # type: ignore[attr-defined]
        ws_url = base.replace("http://", "ws://", 1) + "/ws/agent-gateway/"
        agents = {p.id: Agent(ws_url, p.raw_key) for p in profiles}
        try:
            for agent in agents.values():
                agent.pump(0.2)  # a pong: its session started, its group joined
            redis.kill()
            redis.start()  # the same port, empty: down for about a tenth of a second
            deadline = time.monotonic() + PATIENCE
            with ThreadPoolExecutor(1) as pool:
                creating = pool.submit(create_tasks, base, token, skill.id, list(agents))
                # The agents keep pinging while the tasks are created (the first pushes after
                # the restart may wait on dead Redis connections): one silent for a heartbeat
                # timeout is closed (4408), reconnects, joins its group again, and so hides
                # the fault.
                while time.monotonic() < deadline:
                    if creating.done() and delivered(agents, creating.result()):
                        break
                    for agent in agents.values():
                        agent.pump()
                tasks = creating.result()
            missing = sorted(a for a, agent in agents.items() if tasks[a] not in agent.assigned)
            assert not missing, f"never sent to {missing} (their sockets stayed open)"
            # The consumers that did see Redis fail told their agent to come back.
            codes = {code for agent in agents.values() for code in agent.close_codes}
            assert codes <= {TRY_AGAIN}
        finally:
            for agent in agents.values():
                agent.close()
        assert proc.alive()  # type: ignore[attr-defined]


@pytest.fixture
def holder(make_agent: Callable[..., AgentProfile], skill: Skill) -> AgentProfile:
    """Another agent, whose connection holds the process's receive when Redis fails."""
    return make_agent(id="holder", skills=[skill], a2a_endpoint="")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_failed_receive_has_the_other_connections_rejoin_their_group(
    agent: AgentProfile, holder: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """Only the consumer that held the receive sees Redis fail (closed with 1013); one whose
    membership went with Redis is re-joined at the next tick and sent what was hinted to
    its empty group. A re-join that fails (Redis still away) is tried again."""
    layer = get_channel_layer()
    fail = asyncio.Event()

    async def failing_receive(channel: str) -> dict[str, Any]:
        await fail.wait()
        raise ConnectionError("Connection closed by server.")

    with mock.patch.object(layer, "receive", failing_receive):
        held, _ = await started(holder)
    client, channel = await started(agent)
    await layer.group_discard(presence.agent_group(agent.id), channel)  # Redis lost it
    task = await push(make_task, "ctx-1")
    assert await client.silent()
    fail.set()
    assert await held.closed_with() == TRY_AGAIN

    with mock.patch.object(layer, "group_add", side_effect=ConnectionError("refused")):
        await local.sweep_once()
    assert await client.silent()
    await local.sweep_once()
    frame = await client.recv()
    assert (frame["type"], frame["task"]["id"]) == ("task.assign", str(task.id))
    await local.sweep_once()  # re-joined and resumed once, not at every tick
    assert await client.silent()
    later = await push(make_task, "ctx-2")  # its hint reaches the group again
    assert (await client.recv())["task"]["id"] == str(later.id)
    await client.close()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.distributed
async def test_a_redis_that_lost_the_process_key_has_every_connection_rejoin(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """A restart that no receive noticed: Redis lost the process's key, so the group
    memberships went with it."""
    layer = get_channel_layer()
    assert isinstance(layer, RedisChannelLayer)
    client, channel = await started(agent)
    await local.sweep_once()  # the process's key is in Redis
    assert await client.silent()
    # What a restart does to this process's part of Redis, with no receive failing.
    await layer.connection(0).delete(marker_key(layer))
    await layer.group_discard(presence.agent_group(agent.id), channel)
    task = await push(make_task, "ctx-1")
    assert await client.silent()
    await local.sweep_once()
    frame = await client.recv()
    assert (frame["type"], frame["task"]["id"]) == ("task.assign", str(task.id))
    later = await push(make_task, "ctx-2")
    assert (await client.recv())["task"]["id"] == str(later.id)
    await client.close()
