"""AgentGatewayService: deliveries to agents over the WebSocket gateway.

Save first, then push: every frame owed to an agent is a :class:`~gateway.models.Delivery`
row committed before any ``group_send``. The channel-layer message only says "look now";
a connection *claims* the row with a conditional UPDATE before sending it, so with many
connections and many daphne processes a frame goes out once per connection attempt, and
whatever a lost message leaves behind is sent when the agent next connects.

Synchronous functions here are called from Django views, Celery workers and (on the
gateway's database threads, :mod:`gateway.db`) from the consumer.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from a2a.hints import queue_processing_many
from a2a.models import Task
from a2a.states import TERMINAL_STATES, Transport
from agent_profiles import keys
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from gateway import frames, observe, presence
from gateway.models import OPEN_STATUSES, Delivery, DeliveryKind, DeliveryStatus, Presence
from gateway.notify import DELIVER_EVENT, expiry, group_send_to_agent, notify_on_commit
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)

CLOSE_BAD_KEY = 4401
CLOSE_DISABLED = 4403


# --- auth ----------------------------------------------------------------------------


def authenticate_key(raw: str | None) -> tuple[AgentProfile | None, int | None]:
    """The agent owning an API key, or the close code to refuse the connection with.

    The agent carries the key's prefix as ``gateway_key_prefix``: the session start checks
    that this key is still live (:func:`gateway.sessions.start_session`), since it may be
    revoked while the connection waits to start.
    """
    if not raw:
        return None, CLOSE_BAD_KEY
    agent = ApiKey.authenticate(raw)
    if agent is None:
        return None, CLOSE_BAD_KEY
    if not agent.is_active:
        return None, CLOSE_DISABLED
    agent.gateway_key_prefix = keys.parse_prefix(raw, "a2a")
    return agent, None


# --- pushing -------------------------------------------------------------------------


def outbound_message(task: Task) -> dict[str, Any]:
    """The A2A Message the platform would send over HTTP for this task's current attempt."""
    if task.outbound_message:
        return dict(task.outbound_message)
    return {
        "messageId": f"{task.id}-{task.attempts or 1}",
        "role": "ROLE_USER",
        "parts": [{"data": task.input}],
        "metadata": {"skillId": task.skill_id},
    }


def _with_fallback(task: Task, transport: str, reason: str) -> dict[str, Any]:
    """The task's metadata plus a ``fallbacks`` entry ``{at, from, to, reason}`` if reason."""
    metadata = dict(task.metadata or {})
    if reason:
        fallback = {
            "at": timezone.now().isoformat(),
            "from": task.transport,
            "to": str(transport),
            "reason": reason[:500],
        }
        metadata["fallbacks"] = [*metadata.get("fallbacks", []), fallback]
    return metadata


def push_task(task: Task, *, reason: str = "") -> str:
    """Hand ``task`` to its agent over the gateway; returns the transport used.

    Saves the ``task.assign`` delivery first (idempotent: an open assignment of the task
    to its agent is reused, never duplicated), then pushes it to the agent's group after commit.
    ``"websocket"`` when the agent holds a live connection, else ``"offline"``: the row
    waits as an :class:`~gateway.models.OfflineTask` until the agent connects or it
    expires. A non-empty ``reason`` records a fallback ``{at, from, to, reason}`` in
    ``metadata.fallbacks``. From here on the dispatcher neither sends nor polls over A2A.
    """
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        if task.state in TERMINAL_STATES:
            raise PlatformError(f"Task {task.id} is {task.state}; it cannot be pushed.")
        transport = Transport.WEBSOCKET if presence.is_online(task.agent_id) else Transport.OFFLINE
        # Only an assignment to the task's agent: one still open at an agent the task was
        # taken from (reassigned) would never reach the new agent.
        delivery = Delivery.objects.filter(
            task=task, agent_id=task.agent_id, kind=DeliveryKind.ASSIGN, status__in=OPEN_STATUSES
        ).first()
        if delivery is None:
            delivery = Delivery(task=task, agent_id=task.agent_id, kind=DeliveryKind.ASSIGN)
            delivery.payload = frames.assign(delivery.id, task, outbound_message(task))
            delivery.reason = reason[:500]
            delivery.expires_at = expiry()
            delivery.save()
        task.hand_to_gateway(transport, metadata=_with_fallback(task, transport, reason))
        notify_on_commit(delivery, was_offline=transport == Transport.OFFLINE)
    observe.handed(str(task.id), task.agent_id, "assign", str(transport), reason)
    return str(transport)


def assign_new_tasks(tasks: list[Task]) -> None:
    """Assign just-created tasks of agents without an HTTP endpoint (the gateway is their
    only transport), inside the creation transaction: ``a2a.creation`` calls this through
    the hand-off the gateway registers at app start (see :mod:`gateway.receivers`).

    One read of the agents' status and presence, one INSERT of the ``task.assign``
    deliveries, one UPDATE of the tasks whose agent is online (they arrive as
    ``offline``); the agents' connections are told after commit, with the frame, so it
    leaves within milliseconds of the commit.

    The status is read here, in the creation transaction: the agent came from a registry
    cache, which may still hold an agent another process disabled (or put back to pending)
    a moment ago. Its task is not parked for an agent refused at connect (4403) until
    ``OFFLINE_TASK_TTL``: it goes to the worker as an HTTP agent's does, whose claim moves
    it to another active agent of the skill or ends it FAILED ``agent_inactive``.
    """
    agent_ids = {task.agent_id for task in tasks}
    standing = dict(
        AgentProfile.objects.filter(pk__in=agent_ids, status=AgentStatus.ACTIVE)
        .annotate(online=Exists(presence.fresh_presence().filter(agent_id=OuterRef("pk"))))
        .values_list("pk", "online")
    )
    unable = [task for task in tasks if task.agent_id not in standing]
    if unable:
        _to_worker(unable)
        tasks = [task for task in tasks if task.agent_id in standing]
    online = {agent_id for agent_id, live in standing.items() if live}
    deliveries = []
    for task in tasks:
        delivery = Delivery(
            task=task, agent_id=task.agent_id, kind=DeliveryKind.ASSIGN, expires_at=expiry()
        )
        delivery.payload = frames.assign(delivery.id, task, outbound_message(task))
        deliveries.append(delivery)
    Delivery.objects.bulk_create(deliveries)
    live = [task.pk for task in tasks if task.agent_id in online]
    if live:
        Task.gateway_connected(live)
    for task, delivery in zip(tasks, deliveries, strict=True):
        task.transport = Transport.WEBSOCKET if task.agent_id in online else Transport.OFFLINE
        notify_on_commit(delivery, was_offline=task.transport == Transport.OFFLINE)
        observe.handed(str(task.pk), task.agent_id, "assign", str(task.transport), "no endpoint")


def _to_worker(tasks: list[Task]) -> None:
    """Give new tasks of agents that are no longer active to the worker (see
    :func:`assign_new_tasks`): due now, as a new HTTP task is; started after commit."""
    for task in tasks:
        # A new task of an agent with no endpoint is offline until handed over: the verb
        # of an offline task going back to A2A (rare: one UPDATE per task is fine).
        task.back_to_http()
        log.info(
            "task %s not handed to the gateway: agent %s is not active (the worker moves it)",
            task.pk,
            task.agent_id,
            extra={"task_id": str(task.pk), "agent_id": task.agent_id},
        )
    queue_processing_many([task.pk for task in tasks])


def switch_to_gateway(task: Task, *, reason: str) -> str:
    """Move a task the agent holds (over HTTP) to the gateway without a new assignment."""
    transport = Transport.WEBSOCKET if presence.is_online(task.agent_id) else Transport.OFFLINE
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        task.hand_to_gateway(transport, metadata=_with_fallback(task, transport, reason))
    return str(transport)


def send_followup(task: Task, kind: str, message: dict[str, Any] | None = None) -> str:
    """Send a reply (``kind="message"``) or a cancel (``"cancel"``) to a gateway task.

    Saved first like an assignment and delivered in order after it. Cancelling a task whose
    assignment the agent never received withdraws the assignment instead: there is
    nothing to cancel on the agent's side. A cancel also closes what the agent was sent
    for the task and has not acknowledged (its assignment, a reply): they are not sent
    again after it. Returns ``"websocket"``, ``"offline"`` or
    ``"withdrawn"``.
    """
    if kind not in (DeliveryKind.MESSAGE, DeliveryKind.CANCEL):
        raise ValueError(f"unknown follow-up kind {kind!r}")
    if kind == DeliveryKind.MESSAGE and not isinstance(message, dict):
        raise ValueError("a task.message follow-up needs an A2A Message")
    with transaction.atomic():
        if kind == DeliveryKind.CANCEL:
            # Only this agent's: another agent's pending cancel (of the task taken from it
            # before) must still reach it.
            mine = Delivery.objects.filter(
                task=task, agent_id=task.agent_id, status=DeliveryStatus.PENDING
            )
            withdrawn = mine.filter(kind=DeliveryKind.ASSIGN).update(
                status=DeliveryStatus.CANCELED, closed_reason="task canceled before delivery"
            )
            if withdrawn:
                mine.exclude(kind=DeliveryKind.CANCEL).update(
                    status=DeliveryStatus.CANCELED, closed_reason="task canceled before delivery"
                )
                return "withdrawn"
            # A task that ended has these closed by the task_changed receiver; a task
            # reassigned to another agent goes on, and only this keeps its old agent from
            # getting the old assignment on every reconnect.
            Delivery.objects.filter(
                task=task, agent_id=task.agent_id, status__in=OPEN_STATUSES
            ).exclude(kind=DeliveryKind.CANCEL).update(
                status=DeliveryStatus.CANCELED, closed_reason="task canceled at this agent"
            )
        delivery = Delivery(task=task, agent_id=task.agent_id, kind=kind)
        if kind == DeliveryKind.MESSAGE:
            # Over the socket the agent's task id is ours: follow-ups name it, as they
            # name the agent's own ids over HTTP.
            message = {**(message or {})}
            message.setdefault("taskId", str(task.id))
            message.setdefault("contextId", task.context_id or str(task.id))
            delivery.payload = frames.task_message(delivery.id, task, message)
        else:
            delivery.payload = frames.task_cancel(delivery.id, task)
        delivery.expires_at = expiry()
        delivery.save()
        notify_on_commit(delivery)
    return str(Transport.WEBSOCKET if presence.is_online(task.agent_id) else Transport.OFFLINE)


def disconnect_agent(agent_id: str, code: int = CLOSE_DISABLED) -> None:
    """Close every gateway connection of an agent, in any process (after commit)."""
    if not Presence.objects.filter(agent_id=agent_id).exists():
        return
    transaction.on_commit(
        lambda: group_send_to_agent(agent_id, {"type": "gateway.close", "code": code})
    )


__all__ = [
    "CLOSE_BAD_KEY",
    "CLOSE_DISABLED",
    "DELIVER_EVENT",
    "assign_new_tasks",
    "authenticate_key",
    "disconnect_agent",
    "outbound_message",
    "push_task",
    "send_followup",
    "switch_to_gateway",
]
