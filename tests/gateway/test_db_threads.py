"""The gateway's database work runs on its own threads, which keep their connections."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db.backends.signals import connection_created
from django.test import override_settings

from agent_profiles.models import AgentProfile
from gateway.db import close_pool
from tests.gateway.conftest import open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@override_settings(GATEWAY_DB_THREADS=1)
async def test_a_sockets_database_calls_reuse_one_connection(agent: AgentProfile) -> None:
    close_pool()  # the pool is sized at its first call: start it with one thread
    opened: list[str] = []

    def record(sender: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(record)
    try:
        client = await open_client(agent.raw_key)  # the key's check, the session's start
        for _ in range(5):  # five acks, each looked up (and refused: no such delivery)
            await client.send({"type": "task.ack", "deliveryId": str(uuid.uuid4())})
            assert (await client.recv())["code"] == "unknown_delivery"
        await client.close()  # the presence row's removal
    finally:
        connection_created.disconnect(record)
    gateway_threads = [name for name in opened if name.startswith("gateway-db")]
    # one connection for the key check, the session, five acks and the goodbye
    assert gateway_threads == ["gateway-db_0"]
