"""A live connection whose presence row the sweep deleted (its refreshes failed during a
database outage longer than GATEWAY_HEARTBEAT_TIMEOUT) gets the row back at the next
heartbeat refresh, and is sent what was queued while it counted as offline."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone

from a2a.models import Task
from a2a.states import Transport
from agent_profiles.models import AgentProfile
from gateway import offline, presence, services
from gateway.connections import local
from gateway.db import db
from gateway.models import Delivery, DeliveryStatus, Presence
from tests.gateway.conftest import db_async, open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def swept_as_stale(agent_id: str) -> int:
    """What the beat's sweep does to rows whose refreshes failed for a whole timeout."""
    long_ago = timezone.now() - timedelta(hours=1)
    Presence.objects.filter(agent_id=agent_id).update(last_heartbeat_at=long_ago)
    return offline.drop_stale_presence()


async def test_the_refresh_brings_back_a_swept_row_and_sends_what_waits(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    assert await db_async(swept_as_stale)(agent.id) == 1
    assert not await db_async(presence.is_online)(agent.id)

    # A task pushed meanwhile waits as an offline task; its hint is lost (say Redis
    # blipped), so only the connection's own look at its outbox can find it.
    task = await db_async(make_task)()
    with mock.patch("gateway.notify.group_send_to_agent"):
        assert await db_async(services.push_task)(task) == "offline"
    assert await client.silent()

    await local.sweep_once()  # the heartbeat's refresh

    assert await db_async(presence.is_online)(agent.id)
    frame = await client.recv()
    assert (frame["type"], frame["task"]["id"]) == ("task.assign", str(task.id))
    delivery = await db_async(Delivery.objects.get)(pk=frame["deliveryId"])
    assert delivery.status == DeliveryStatus.SENT
    assert (await db_async(Task.objects.get)(pk=task.pk)).transport == Transport.WEBSOCKET
    await client.close()
    assert not await db_async(Presence.objects.filter(agent_id=agent.id).exists)()


async def test_a_refresh_with_every_row_present_changes_nothing_else(
    agent: AgentProfile,
) -> None:
    client = await open_client(agent.raw_key)
    await client.send({"type": "ping"})
    assert await client.recv() == {"type": "pong"}
    row: Any = await db_async(Presence.objects.get)(agent_id=agent.id)
    with mock.patch.object(type(local), "_resume") as resume:
        await local.sweep_once()
    resume.assert_not_called()
    again: Any = await db_async(Presence.objects.get)(agent_id=agent.id)
    assert (again.pk, again.connected_at) == (row.pk, row.connected_at)
    assert again.last_heartbeat_at > row.last_heartbeat_at
    await client.close()


async def test_a_row_put_back_for_a_connection_that_closed_meanwhile_is_deleted(
    agent: AgentProfile,
) -> None:
    """The connection's end_session deleted its row just before the refresh re-created it:
    a closed socket must not count as online until the sweep finds the row stale."""
    recreated = await db(presence.refresh)({"closed-meanwhile": (agent.id, "10.0.0.1")})
    assert recreated == ["closed-meanwhile"]
    assert await db_async(presence.is_online)(agent.id)
    await local._resume(recreated)
    assert not await db_async(presence.is_online)(agent.id)


def test_refresh_skips_the_rows_of_deleted_agents(agent: AgentProfile) -> None:
    """An agent deleted while connected is not brought back (its row would fail the
    foreign key, and with it the refresh of every other connection)."""
    recreated = presence.refresh({"a": (agent.id, ""), "b": ("deleted-agent", "")})
    assert recreated == ["a"]
    assert list(Presence.objects.values_list("channel_name", flat=True)) == ["a"]
    assert presence.refresh({"a": (agent.id, "")}) == []
