"""With the database down, the gateway refuses new sockets with 1013 ("try again later")
instead of crashing the handler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from agent_profiles.models import AgentProfile
from gateway.db import close_pool
from tests.gateway.conftest import open_client
from tests.support.serving import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def database_down(agent: AgentProfile) -> Iterator[AgentProfile]:
    shared = connections.settings["default"]  # every thread's connection reads this dict
    saved = dict(shared)
    close_pool()  # the gateway's threads keep their connections: make them reconnect
    connections.close_all()
    if connections["default"].vendor == "sqlite":
        shared["NAME"] = "/nonexistent-dir/for/sure/db.sqlite3"
    else:
        shared.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        yield agent
    finally:
        close_pool()
        connections.close_all()
        shared.clear()
        shared.update(saved)


@pytest.mark.parametrize("auth_frame", [False, True])
async def test_a_socket_opened_during_an_outage_is_told_to_come_back(
    database_down: AgentProfile, auth_frame: bool
) -> None:
    client = await open_client(database_down.raw_key, auth_frame=auth_frame)  # type: ignore[attr-defined]
    error: Any = await client.recv()
    assert (error["type"], error["code"]) == ("error", "unavailable")
    assert await client.closed_with() == 1013
