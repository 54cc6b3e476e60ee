"""The gateway's lifecycle lines and metrics: a socket connects and disconnects (one INFO
line each, with the agent's id; the sockets gauge up and down), a bad key is counted."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_profiles.models import AgentProfile
from platform_site import metrics
from tests.gateway.conftest import open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def sample(counter: Any, **labels: str) -> float:
    metric = counter.labels(**labels) if labels else counter
    return float(metric._value.get())


async def test_connect_and_disconnect_are_one_line_each_with_the_agent_id(
    agent: AgentProfile, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.lifecycle")
    sockets = sample(metrics.GATEWAY_SOCKETS)
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    assert sample(metrics.GATEWAY_SOCKETS) == sockets + 1
    await client.close()
    lines = [r for r in caplog.records if r.name == "gateway.lifecycle"]
    messages = [r.getMessage() for r in lines]
    assert len(messages) == 2
    assert messages[0].startswith(f"agent {agent.id} connected to the gateway")
    assert messages[1].startswith(f"agent {agent.id} disconnected from the gateway (code")
    assert {r.agent_id for r in lines} == {agent.id}  # type: ignore[attr-defined]
    assert sample(metrics.GATEWAY_SOCKETS) == sockets


async def test_a_refused_connection_is_counted_by_its_close_code(agent: AgentProfile) -> None:
    before = sample(metrics.GATEWAY_CONNECTIONS, outcome="refused_4401")
    client = await open_client(agent.raw_key + "x")
    assert (await client.recv())["type"] == "error"
    assert await client.closed_with() == 4401
    assert sample(metrics.GATEWAY_CONNECTIONS, outcome="refused_4401") == before + 1
