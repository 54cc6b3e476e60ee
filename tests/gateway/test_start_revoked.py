"""Access taken away while a connection is starting (after the handshake's key check,
before its presence row exists) still closes that connection."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles import access
from agent_profiles.models import AgentProfile
from gateway import services, sessions
from gateway.models import Presence
from tests.gateway.conftest import db_async, open_client

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _before_the_session_starts(monkeypatch: pytest.MonkeyPatch, revoke: Any) -> None:
    """Run ``revoke(agent)`` just before the connection's session starts: the window in
    which the revocation finds no presence row (a reconnect storm queues sessions at the
    start gate, so it can be long)."""
    original = sessions.start_session

    def revoke_first(profile: AgentProfile, *args: Any) -> Any:
        revoke(AgentProfile.objects.get(pk=profile.pk))
        return original(profile, *args)

    monkeypatch.setattr("gateway.sessions.start_session", revoke_first)


async def test_a_key_rotated_while_the_connection_starts_closes_it_with_4401(
    agent: AgentProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket used to stay open, served, on the revoked key."""
    _before_the_session_starts(monkeypatch, access.rotate_key)
    client = await open_client(agent.raw_key)
    error = await client.recv()
    assert (error["type"], error["code"]) == ("error", "unauthorized")
    assert await client.closed_with() == 4401
    assert not await db_async(Presence.objects.filter(agent=agent).exists)()


async def test_an_agent_disabled_while_its_connection_starts_is_closed_with_4403(
    agent: AgentProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disable(profile: AgentProfile) -> None:
        access.disable(AgentProfile.objects.filter(pk=profile.pk))

    _before_the_session_starts(monkeypatch, disable)
    client = await open_client(agent.raw_key, auth_frame=True)
    assert await client.closed_with() == 4403


def test_the_session_checks_the_key_the_connection_opened_with(agent: AgentProfile) -> None:
    """The agent has a live key again after a rotation: the check is of the connection's
    own key, not of any key."""
    authenticated, code = services.authenticate_key(agent.raw_key)
    assert authenticated is not None
    assert code is None
    access.rotate_key(agent)
    with pytest.raises(sessions.AccessLost) as lost:
        sessions.start_session(authenticated, "chan-a", "127.0.0.1")
    assert lost.value.code == services.CLOSE_BAD_KEY
    assert not Presence.objects.filter(channel_name="chan-a").exists()
    # With the new key it starts.
    fresh, _ = services.authenticate_key(access.rotate_key(agent))
    assert fresh is not None
    assert sessions.start_session(fresh, "chan-b", "127.0.0.1") == []
    assert Presence.objects.filter(channel_name="chan-b").exists()
