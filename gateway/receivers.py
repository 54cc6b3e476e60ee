"""Signal receivers keeping the gateway's rows in step with tasks and agents, and the
hand-off of new socket-only tasks (registered with ``a2a.creation`` when this module is
imported at app start)."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_save, pre_delete
from django.dispatch import receiver

from a2a.creation import register_gateway_hand_off
from a2a.signals import task_changed
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState, Transport
from agent_profiles.access import KEY_REVOKED, access_revoked
from agent_profiles.models import AgentProfile, ApiKey
from gateway import observe, services  # noqa: F401  (observe: metrics at scrape time)
from gateway.offline import close_open_deliveries, relabel_waiting

log = logging.getLogger(__name__)


register_gateway_hand_off(services.assign_new_tasks)


@receiver(task_changed, dispatch_uid="gateway.task_changed")
def withdraw_deliveries_of_finished_task(sender: Any, task_id: Any, **kwargs: Any) -> None:
    """A finished task owes its agent nothing more (a cancel already queued still goes);
    a socket task replied to while its agent is away waits offline.

    The signal carries the new ``state``; the row is read only when a sender omits it. A
    task that never went to the gateway (``watched`` False) has no delivery to withdraw.
    """
    from a2a.models import Task

    if kwargs.get("watched") is False:
        return
    try:
        state = kwargs.get("state")
        if state is None:
            state = Task.objects.filter(pk=task_id).values_list("state", flat=True).first()
        if state in TERMINAL_STATES:
            close_open_deliveries(task_id, f"task {state}")
        elif _replied_on_socket(kwargs.get("task"), kwargs.get("from_state"), state):
            # A reply to an agent that went away waits offline (OFFLINE_TASK_TTL), now
            # rather than at the next sweep: its deadline would not wait that long.
            relabel_waiting(task_id)
    except Exception:  # receivers must not raise into the transition's caller
        log.exception("gateway: could not withdraw deliveries of task %s", task_id)


def _replied_on_socket(task: Any, from_state: Any, state: Any) -> bool:
    """Whether the transition is a person's reply (a question answered) to a task the
    gateway carries over a socket; only then may its reply wait for the agent."""
    return (
        from_state in INTERRUPTED_STATES
        and state == TaskState.WORKING
        and getattr(task, "transport", None) == Transport.WEBSOCKET
    )


@receiver(post_save, sender=AgentProfile, dispatch_uid="gateway.agent_saved")
def disconnect_disabled_agent(sender: Any, instance: AgentProfile, **kwargs: Any) -> None:
    """A disabled agent loses its open connections at once (close 4403)."""
    if not instance.is_active:
        services.disconnect_agent(instance.id)


@receiver(access_revoked, dispatch_uid="gateway.access_revoked")
def disconnect_agent_losing_access(sender: Any, agent_id: str, reason: str, **kwargs: Any) -> None:
    """Disabled (4403) or its key revoked (4401): the agent's sockets close at once."""
    code = services.CLOSE_BAD_KEY if reason == KEY_REVOKED else services.CLOSE_DISABLED
    _disconnect(agent_id, code)


# Deleting takes access away too (the admin's "Delete selected" on keys and agents, a
# cascade, the shell), without passing through ``agent_profiles.access``. Before the rows
# go, while the agent's presence rows still say where its sockets are; the close is sent
# only if the delete commits (``disconnect_agent`` waits for the commit).


@receiver(pre_delete, sender=ApiKey, dispatch_uid="gateway.key_deleted")
def disconnect_agent_losing_its_key(
    sender: Any, instance: ApiKey, origin: Any = None, **kwargs: Any
) -> None:
    """A live key deleted: like revoking it, the agent's sockets close with 4401. A key
    already revoked closed them then; a key going with its agent leaves it to the agent's
    own receiver, so the sockets get one close."""
    if instance.revoked_at is not None or _deleting_agents(origin):
        return
    _disconnect(instance.agent_id, services.CLOSE_BAD_KEY)


@receiver(pre_delete, sender=AgentProfile, dispatch_uid="gateway.agent_deleted")
def disconnect_deleted_agent(sender: Any, instance: AgentProfile, **kwargs: Any) -> None:
    """A deleted agent's sockets close with 4401: its key went with it, and a reconnect
    is refused with the same code."""
    _disconnect(instance.pk, services.CLOSE_BAD_KEY)


def _deleting_agents(origin: Any) -> bool:
    """Whether the delete started from agents (an instance or a queryset of them)."""
    return isinstance(origin, AgentProfile) or getattr(origin, "model", None) is AgentProfile


def _disconnect(agent_id: str, code: int) -> None:
    """Close the agent's sockets with ``code`` after commit; a failure is logged."""
    try:
        services.disconnect_agent(agent_id, code)
    except Exception:  # receivers must not raise into the admin's, the API's or a delete's caller
        log.exception("gateway: could not disconnect agent %s", agent_id)
