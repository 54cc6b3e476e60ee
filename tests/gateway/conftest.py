"""Fixtures for the gateway tests: an agent with a skill, its tasks, and a WebSocket
client on the real ASGI application (``WebsocketCommunicator``)."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from a2a.models import Task
from agent_profiles.models import AgentProfile, Skill
from gateway.db import close_pool
from platform_site.asgi import application

PATH = "/ws/agent-gateway/"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def skill(make_skill: Callable[..., Skill]) -> Skill:
    return make_skill()


@pytest.fixture
def agent(make_agent: Callable[..., AgentProfile], skill: Skill) -> AgentProfile:
    return make_agent(skills=[skill], a2a_endpoint="")


@pytest.fixture
def make_task(skill: Skill, agent: AgentProfile) -> Callable[..., Task]:
    def make(**overrides: Any) -> Task:
        fields: dict[str, Any] = {
            "skill": skill,
            "agent": agent,
            "input": {"product": "kettle"},
            "context_id": "ctx-1",
        }
        fields.update(overrides)
        return Task.objects.create(**fields)

    return make


class Client:
    """A gateway connection for tests: JSON frames in and out."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.comm = communicator
        self.closed = False

    async def send(self, frame: Any) -> None:
        await self.comm.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, wait: float = 3) -> dict[str, Any]:
        return await self.comm.receive_json_from(timeout=wait)

    async def closed_with(self, wait: float = 3) -> int:
        """Skip frames until the close; the close code."""
        while True:
            output = await self.comm.receive_output(timeout=wait)
            if output["type"] == "websocket.close":
                await self.close()  # as daphne does once the server closed
                return int(output.get("code", 1000))

    async def silent(self, wait: float = 0.2) -> bool:
        return await self.comm.receive_nothing(timeout=wait)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.comm.disconnect()


async def open_client(key: str | None = None, *, auth_frame: bool = False) -> Client:
    """Connect; with ``key`` as a Bearer header, or as a first ``auth`` frame."""
    headers = [(b"authorization", f"Bearer {key}".encode())] if key and not auth_frame else []
    comm = WebsocketCommunicator(application, PATH, headers=headers)
    connected, _ = await comm.connect()
    assert connected
    client = Client(comm)
    if key and auth_frame:
        await client.send({"type": "auth", "apiKey": key})
    return client


db_async = database_sync_to_async


async def holding(key: str, task: Task) -> tuple[Client, dict[str, Any]]:
    """A connection (with ``key``) that was handed ``task`` and acknowledged it; the
    connection and the ``task.assign`` frame."""
    from gateway import services

    client = await open_client(key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}  # the session started
    await db_async(services.push_task)(task)
    assign = await client.recv()
    await client.send({"type": "task.ack", "deliveryId": assign["deliveryId"]})
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}  # the ack was applied
    return client, assign


@pytest.fixture(autouse=True)
def _no_persistent_connections_in_threads() -> Any:
    """The consumer runs ORM code on the gateway's database threads, which keep their
    connections: close them after each test (PostgreSQL will not drop a test database
    with one open). Other threads' calls close theirs afterwards (CONN_MAX_AGE=0)."""
    from django.db import connections

    db_settings = connections.settings["default"]
    old = db_settings.get("CONN_MAX_AGE", 0)
    db_settings["CONN_MAX_AGE"] = 0
    yield
    close_pool()
    db_settings["CONN_MAX_AGE"] = old
    # Connections opened inside finished consumer tasks' contexts are unreachable now;
    # collecting them closes their sockets.
    gc.collect()
