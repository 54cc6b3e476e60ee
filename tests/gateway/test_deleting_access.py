"""Deleting an agent's key or the agent itself takes its access away like revoking it: the
open sockets close (4401). Deletes do not pass through :mod:`agent_profiles.access` (the
admin offers "Delete selected" next to "Revoke selected"), so ``gateway.receivers`` reacts
to the delete itself; before, the deleted key could not open a new socket but the one it
had opened stayed open and kept working."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from agent_profiles.models import AgentProfile, ApiKey
from gateway.models import Presence
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def admin_delete(model: str, pk: Any) -> int:
    """The admin's "Delete selected" action, confirmed; returns the status code."""
    from django.contrib.auth import get_user_model

    staff, _ = get_user_model().objects.get_or_create(
        username="ops", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(staff)
    data = {"action": "delete_selected", "_selected_action": [pk], "post": "yes"}
    return client.post(f"/admin/agent_profiles/{model}/", data).status_code


async def test_deleting_the_key_in_the_admin_closes_its_socket_4401(
    agent: AgentProfile,
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    key = await db_async(ApiKey.objects.get)(agent=agent)
    assert await db_async(admin_delete)("apikey", key.pk) == 302
    assert not await db_async(ApiKey.objects.filter(pk=key.pk).exists)()
    assert await client.closed_with() == 4401
    again = await open_client(agent.raw_key)  # and it opens no new one
    assert await again.closed_with() == 4401


async def test_deleting_the_agent_in_the_admin_closes_its_socket_4401(
    agent: AgentProfile,
) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    assert await db_async(admin_delete)("agentprofile", agent.pk) == 302
    assert not await db_async(AgentProfile.objects.filter(pk=agent.pk).exists)()
    assert await client.closed_with() == 4401
    assert not await db_async(Presence.objects.filter(agent_id=agent.pk).exists)()


async def test_deleting_an_agent_sends_its_socket_one_close(
    agent: AgentProfile, monkeypatch: Any
) -> None:
    """The agent's live key goes with it (a cascade); the key's receiver leaves the close to
    the agent's, so the socket is told once."""
    from gateway import services

    calls: list[tuple[str, int]] = []
    real = services.disconnect_agent

    def counting(agent_id: str, code: int = services.CLOSE_DISABLED) -> None:
        calls.append((agent_id, code))
        real(agent_id, code)

    monkeypatch.setattr(services, "disconnect_agent", counting)
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(AgentProfile.objects.filter(pk=agent.pk).delete)()
    assert await client.closed_with() == 4401
    assert calls == [(agent.pk, 4401)]


async def test_only_deleting_the_live_key_closes_the_socket(agent: AgentProfile) -> None:
    """A revoked key opened no socket that is still open: deleting it leaves the socket the
    agent opened with its new key; deleting that key closes it."""
    old = await db_async(ApiKey.objects.get)(agent=agent)
    new_key = await db_async(agent.issue_key)()  # revokes the old key
    client = await open_client(new_key)
    await ping_pong(client)
    await db_async(ApiKey.objects.filter(pk=old.pk).delete)()
    await ping_pong(client)
    await db_async(ApiKey.objects.filter(agent=agent).delete)()
    assert await client.closed_with() == 4401


async def test_the_close_waits_for_the_delete_to_commit(agent: AgentProfile) -> None:
    """A delete rolled back takes nothing away; the same delete committed does."""
    client = await open_client(agent.raw_key)
    await ping_pong(client)

    def delete(*, commit: bool) -> None:
        with transaction.atomic():
            AgentProfile.objects.filter(pk=agent.pk).delete()
            transaction.set_rollback(not commit)

    await db_async(delete)(commit=False)
    assert await db_async(AgentProfile.objects.filter(pk=agent.pk).exists)()
    await ping_pong(client)
    await db_async(delete)(commit=True)
    assert await client.closed_with() == 4401
