"""Taking access away closes the agent's sockets at once, whichever way it is done: the
admin's bulk "disable" (which never ran ``post_save``), "rotate key", and revoking keys in
the admin, all through :mod:`agent_profiles.access`."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agent_profiles import access
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from gateway.models import Presence
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def admin_post(url: str, data: dict[str, Any]) -> int:
    from django.contrib.auth import get_user_model

    staff, _ = get_user_model().objects.get_or_create(
        username="ops", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(staff)
    return client.post(url, data).status_code


async def test_the_admin_disable_action_closes_the_socket_4403(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    status = await db_async(admin_post)(
        "/admin/agent_profiles/agentprofile/",
        {"action": "disable", "_selected_action": [agent.pk]},
    )
    assert status == 302
    assert await client.closed_with() == 4403
    stored = await db_async(AgentProfile.objects.get)(pk=agent.pk)
    assert stored.status == AgentStatus.DISABLED
    assert not await db_async(Presence.objects.filter(agent_id=agent.pk).exists)()


async def test_the_admin_rotate_action_closes_the_socket_4401(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    await db_async(admin_post)(
        "/admin/agent_profiles/agentprofile/",
        {"action": "rotate_key", "_selected_action": [agent.pk]},
    )
    assert await client.closed_with() == 4401
    again = await open_client(agent.raw_key)  # the old key no longer opens one
    assert await again.closed_with() == 4401


async def test_revoking_a_key_in_the_admin_closes_the_socket_4401(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    key = await db_async(ApiKey.objects.get)(agent=agent)
    await db_async(admin_post)(
        "/admin/agent_profiles/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
    )
    assert await client.closed_with() == 4401


async def test_an_agent_on_another_agents_revocation_keeps_its_socket(
    agent: AgentProfile, make_agent: Any, skill: Any
) -> None:
    other = await db_async(make_agent)(id="agent-two", skills=[skill], a2a_endpoint="")
    mine = await open_client(agent.raw_key)
    theirs = await open_client(other.raw_key)
    await ping_pong(mine)
    await ping_pong(theirs)
    await db_async(access.disable)(AgentProfile.objects.filter(pk=other.pk))
    assert await theirs.closed_with() == 4403
    await ping_pong(mine)
    await mine.close()


async def test_approving_does_not_close_anything(agent: AgentProfile) -> None:
    client = await open_client(agent.raw_key)
    await ping_pong(client)
    changed = await db_async(access.set_status)(
        AgentProfile.objects.filter(pk=agent.pk), AgentStatus.ACTIVE
    )
    assert changed == 0
    await ping_pong(client)
    await client.close()


async def test_a_handler_that_dies_leaves_no_presence_behind(
    agent: AgentProfile, monkeypatch: Any
) -> None:
    from gateway import frames
    from gateway.connections import local

    client = await open_client(agent.raw_key)
    await ping_pong(client)
    assert len(local) == 1

    def crash(raw: Any) -> Any:
        raise RecursionError("a bug in a frame handler")

    monkeypatch.setattr(frames, "parse", crash)
    await client.send({"type": "ping"})
    with pytest.raises(RecursionError):
        await client.comm.receive_output(timeout=3)
    assert len(local) == 0
    assert not await db_async(Presence.objects.filter(agent_id=agent.pk).exists)()
