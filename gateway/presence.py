"""Which agents hold an open gateway connection right now.

Presence lives in the database (one :class:`~gateway.models.Presence` row per connection)
so every daphne process and every Celery worker sees the same answer. A row counts only
while its heartbeat is fresh: each daphne process refreshes the rows of its own live
connections every ``GATEWAY_HEARTBEAT_TIMEOUT / 3`` seconds in one UPDATE, so when a
process dies its rows go stale and stop counting within one timeout, and the sweep
deletes them. A live connection whose row the sweep deleted (its refreshes failed during
a database outage) gets it back at the next refresh.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from agent_profiles.models import AgentProfile, AgentStatus
from gateway.models import Presence

# This process, as written in Presence.server_id. The random part keeps a restarted
# process with a recycled pid apart from its dead predecessor.
SERVER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

GROUP_PREFIX = "gw."


def agent_group(agent_id: str) -> str:
    """The channel-layer group of one agent's connections (names are limited to 100 chars)."""
    name = GROUP_PREFIX + agent_id
    if len(name) < 100:
        return name
    return GROUP_PREFIX + "h." + uuid.uuid5(uuid.NAMESPACE_URL, agent_id).hex


def heartbeat_cutoff(now: datetime | None = None) -> datetime:
    """Rows whose last heartbeat is older than this are stale (their process is gone)."""
    return (now or timezone.now()) - timedelta(seconds=settings.GATEWAY_HEARTBEAT_TIMEOUT)


def fresh_presence() -> QuerySet[Presence]:
    """Presence rows that count as online."""
    return Presence.objects.filter(
        last_heartbeat_at__gte=heartbeat_cutoff(), agent__status=AgentStatus.ACTIVE
    )


def online_agent_ids() -> set[str]:
    """Ids of the active agents with at least one live gateway connection."""
    return set(fresh_presence().values_list("agent_id", flat=True).distinct())


def is_online(agent_id: str) -> bool:
    """Whether the agent holds at least one live gateway connection."""
    return fresh_presence().filter(agent_id=agent_id).exists()


def register(agent_id: str, channel_name: str, remote_addr: str = "") -> Presence:
    """Record a new connection of ``agent_id`` held by this process (one INSERT: channel
    names are new for every connection)."""
    return Presence.objects.create(
        agent_id=agent_id,
        channel_name=channel_name,
        server_id=SERVER_ID,
        remote_addr=remote_addr[:100],
    )


def unregister(channel_name: str) -> None:
    """Forget a connection that closed."""
    Presence.objects.filter(channel_name=channel_name).delete()


def refresh(connections: dict[str, tuple[str, str]]) -> list[str]:
    """Refresh the heartbeat of this process's live connections; re-register the ones whose
    row is gone. ``connections`` maps each channel name to ``(agent_id, remote_addr)``;
    returns the channel names whose row had to be created again.

    Normally one UPDATE per 500 connections. A row can be gone while its socket is open:
    during a database outage longer than ``GATEWAY_HEARTBEAT_TIMEOUT`` the refreshes
    failed, the sweep deleted the rows as stale, and an UPDATE alone would have left the
    agent "offline" (no fallback, no renotify, not preferred by the matcher) until it
    reconnected. Only when the UPDATE missed some rows are they looked up and inserted.
    """
    now, recreated = timezone.now(), []
    names = list(connections)
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        rows = Presence.objects.filter(channel_name__in=chunk)
        if rows.update(last_heartbeat_at=now) == len(chunk):
            continue
        present = set(rows.values_list("channel_name", flat=True))
        missing = [name for name in chunk if name not in present]
        # A row needs its agent (a foreign key): an agent deleted while connected is not
        # brought back, and does not fail the refresh of every other connection.
        agents = {connections[name][0] for name in missing}
        known = set(AgentProfile.objects.filter(pk__in=agents).values_list("pk", flat=True))
        missing = [name for name in missing if connections[name][0] in known]
        # ignore_conflicts: a row that appeared meanwhile (channel_name is unique) is kept.
        Presence.objects.bulk_create(
            [
                Presence(
                    agent_id=connections[name][0],
                    channel_name=name,
                    server_id=SERVER_ID,
                    remote_addr=connections[name][1][:100],
                    last_heartbeat_at=now,
                )
                for name in missing
            ],
            ignore_conflicts=True,
        )
        recreated += missing
    return recreated


def unregister_many(channel_names: list[str]) -> None:
    """Forget connections that closed (see :func:`refresh`: a row re-registered for a
    connection that closed meanwhile)."""
    Presence.objects.filter(channel_name__in=channel_names).delete()


def drop_stale() -> int:
    """Delete presence rows whose process stopped refreshing them (crash, kill -9)."""
    deleted, _ = Presence.objects.filter(last_heartbeat_at__lt=heartbeat_cutoff()).delete()
    return deleted


def online_since(agent_ids: list[str]) -> dict[str, datetime]:
    """For the admin: the earliest live connection time of each online agent."""
    result: dict[str, datetime] = {}
    rows = fresh_presence().filter(agent_id__in=agent_ids).values_list("agent_id", "connected_at")
    for agent_id, connected_at in rows:
        if agent_id not in result or connected_at < result[agent_id]:
            result[agent_id] = connected_at
    return result
