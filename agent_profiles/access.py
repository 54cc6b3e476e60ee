"""Taking access away from agents: disable, rotate a key, revoke keys.

The one place these happen (the admin's actions and any API call them), so that each also
closes the agent's open gateway sockets at once. Bulk ``queryset.update`` sends no
``post_save``, which is how the admin's "disable" used to leave sockets open.

The registry cannot import the gateway (imports point gateway → a2a → agent_profiles), so
it sends :data:`access_revoked` after commit; the gateway's receiver closes the sockets
(``gateway.receivers``). Deleting a live key or an agent (the admin's "Delete selected", a
cascade) takes access away without passing here; the gateway's ``pre_delete`` receivers
close those sockets (4401) the same way.

Each of these is a bulk ``update()`` (no ``post_save``), so each also sends
:data:`agent_profiles.signals.registry_changed` after commit: what a process caches of the
agents (the registry cache of task creation, the A2A face's tokens) is dropped there at
once, and a disabled agent is not given a new task by the process that disabled it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import QuerySet
from django.dispatch import Signal
from django.utils import timezone

from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from agent_profiles.signals import registry_changed

# Sent after commit with ``agent_id`` and ``reason`` ("disabled" or "key_revoked"): the
# agent's open connections must close (4403 disabled, 4401 key revoked).
access_revoked = Signal()

DISABLED = "disabled"
KEY_REVOKED = "key_revoked"


def _announce(agent_ids: Iterable[str], reason: str) -> None:
    ids = sorted(set(agent_ids))
    transaction.on_commit(
        lambda: [access_revoked.send(AgentProfile, agent_id=i, reason=reason) for i in ids]
    )


def _changed(agent_ids: Iterable[str]) -> None:
    """After commit, tell this process's caches that these agents changed (see above)."""
    ids = sorted(set(agent_ids))
    if ids:
        transaction.on_commit(lambda: registry_changed.send(AgentProfile, agent_ids=ids))


def set_status(agents: QuerySet[AgentProfile], status: str) -> int:
    """Give ``agents`` a new status; agents leaving ``active`` lose their sockets.

    Returns how many agents changed.
    """
    with transaction.atomic():
        changing = agents.exclude(status=status)
        ids = list(changing.values_list("pk", flat=True))
        count = AgentProfile.objects.filter(pk__in=ids).update(
            status=status, updated_at=timezone.now()
        )
        _changed(ids)  # an approved agent is a candidate at once too
        if status != AgentStatus.ACTIVE:
            _announce(ids, DISABLED)
    return count


def disable(agents: QuerySet[AgentProfile]) -> int:
    """Disable ``agents``: they cannot authenticate, and their sockets close with 4403."""
    return set_status(agents, AgentStatus.DISABLED)


def rotate_key(agent: AgentProfile) -> str:
    """Revoke the agent's keys and return a new one (shown once); open sockets close with
    4401 (they were opened with a key that no longer works)."""
    with transaction.atomic():
        raw = agent.issue_key()
        _changed([agent.pk])
        _announce([agent.pk], KEY_REVOKED)
    return raw


def revoke_keys(keys: QuerySet[ApiKey]) -> int:
    """Revoke API keys; their agents' open sockets close with 4401.

    A connection does not record which key opened it, so every socket of an affected agent
    closes. That is exactly the sockets the revoked key opened: an agent has one live key
    at a time (:meth:`~agent_profiles.models.AgentProfile.issue_key` revokes the others),
    and a key already revoked is not announced again.
    """
    with transaction.atomic():
        live = keys.filter(revoked_at__isnull=True)
        agent_ids = list(live.values_list("agent_id", flat=True))
        count = live.update(revoked_at=timezone.now())
        _changed(agent_ids)
        _announce(agent_ids, KEY_REVOKED)
    return count
