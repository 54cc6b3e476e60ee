"""What a gateway connection does with the database: start a session, claim and send
deliveries, record acks, apply ``task.update`` frames (the consumer calls these through
``gateway.services`` on a thread pool)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from a2a import rows
from a2a.models import Task
from a2a.states import TERMINAL_STATES, TaskState, Transport, normalize_state
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from gateway import presence
from gateway.frames import MAX_SENT_BYTES, FrameError
from gateway.models import OPEN_STATUSES, Delivery, DeliveryKind, DeliveryStatus
from gateway.offline import requeue_closed
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)


def outbox(agent_id: str, channel_name: str | None = None) -> list[uuid.UUID]:
    """The agent's open deliveries in sending order: unacked ones first, then pending ones,
    each oldest first (one query). With ``channel_name`` (a connection starting), only what
    that connection may take: not the unacked deliveries another live connection holds
    (:func:`claim` would refuse each of them, one query apiece, on every connection the
    agent opened)."""
    rows = Delivery.objects.filter(agent_id=agent_id, status__in=OPEN_STATUSES)
    if channel_name is not None:
        live = (
            presence.fresh_presence().filter(agent_id=agent_id).exclude(channel_name=channel_name)
        )
        rows = rows.exclude(channel_name__in=live.values("channel_name"))
    ordered = sorted(rows.values_list("status", "created_at", "id"), key=_outbox_order)
    return [delivery_id for _status, _created, delivery_id in ordered]


def _outbox_order(row: tuple[str, Any, uuid.UUID]) -> tuple[int, Any, str]:
    status, created_at, delivery_id = row
    return (0 if status == DeliveryStatus.SENT else 1, created_at, str(delivery_id))


class AccessLost(Exception):
    """The agent lost access while its connection was starting: close with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(f"access lost (close {code})")
        self.code = code


def start_session(agent: AgentProfile, channel_name: str, remote_addr: str) -> list[uuid.UUID]:
    """A connection joined: record its presence, note the agent as seen, return its outbox.

    The key was checked at the handshake, but the connection may have waited since (the
    start gate, the group join), and a key revoked or an agent disabled meanwhile found no
    presence row, so no connection to close. With the row in place (anything later finds
    it), access is checked again; lost, the row goes and :class:`AccessLost` tells the
    consumer to close (4401 / 4403).
    """
    presence.register(agent.id, channel_name, remote_addr)
    lost = _access_lost(agent)
    if lost is not None:
        presence.unregister(channel_name)
        raise AccessLost(lost)
    if agent.gateway_seen_at is None:
        # The agent uses the gateway: its offline tasks may wait for it (OFFLINE_TASK_TTL).
        agent.gateway_seen_at = timezone.now()
        AgentProfile.objects.filter(pk=agent.pk).update(gateway_seen_at=agent.gateway_seen_at)
    seen = agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 60:
        agent.touch()
    return outbox(agent.id, channel_name)


def _access_lost(agent: AgentProfile) -> int | None:
    """The close code when the key the connection opened with (``gateway_key_prefix``, set
    by :func:`gateway.services.authenticate_key`; any live key of the agent without it) no
    longer works (4401) or the agent is no longer active (4403); None while both hold.
    One query."""
    from gateway.services import CLOSE_BAD_KEY, CLOSE_DISABLED

    live = ApiKey.objects.filter(agent_id=OuterRef("pk"), revoked_at__isnull=True)
    prefix = getattr(agent, "gateway_key_prefix", None)
    if prefix:
        live = live.filter(prefix=prefix)
    row = AgentProfile.objects.filter(pk=agent.pk).values_list("status", Exists(live)).first()
    if row is None or not row[1]:
        return CLOSE_BAD_KEY  # deleted with its keys, or the key revoked
    if row[0] != AgentStatus.ACTIVE:
        return CLOSE_DISABLED
    return None


def end_session(channel_name: str) -> int:
    """A connection closed: forget its presence, then put back what it was sent and did not
    acknowledge, for the agent's other connections (:func:`gateway.offline.requeue_closed`);
    how many were put back."""
    presence.unregister(channel_name)
    return requeue_closed(channel_name)


def claim_pending(
    delivery_id: str, agent_id: str, channel_name: str, task_id: str, was_offline: bool
) -> bool:
    """Claim a just-pushed delivery whose frame came with the hint: one conditional UPDATE.

    A delivery withdrawn meanwhile (task canceled or ended) is no longer pending, so it is
    not sent.
    """
    claimed = Delivery.objects.filter(
        pk=delivery_id, agent_id=agent_id, status=DeliveryStatus.PENDING
    ).update(
        status=DeliveryStatus.SENT,
        channel_name=channel_name,
        sent_at=timezone.now(),
        attempts=F("attempts") + 1,
    )
    if claimed and was_offline:
        Task.gateway_connected(task_id)
    return bool(claimed)


def claim(
    delivery_id: uuid.UUID | str, agent_id: str, channel_name: str, *, resend: bool = False
) -> dict[str, Any] | None:
    """Claim an open delivery for sending on this connection; its frame, or None.

    A conditional UPDATE, so of several connections (in any process) exactly one sends a
    pending delivery. ``resend`` (a new connection's outbox) also takes deliveries sent
    on a connection that is gone, i.e. not acked and not held by a live connection. A
    delivery of a task that ended meanwhile, or that was given to another agent, is closed
    instead of sent (cancels still go).
    """
    rows = Delivery.objects.filter(pk=delivery_id, agent_id=agent_id)
    if resend:
        live = (
            presence.fresh_presence().filter(agent_id=agent_id).exclude(channel_name=channel_name)
        )
        rows = rows.filter(status__in=OPEN_STATUSES).exclude(
            channel_name__in=live.values("channel_name")
        )
    else:
        rows = rows.filter(status=DeliveryStatus.PENDING)
    delivery = rows.select_related("task").first()
    if delivery is None or delivery.channel_name == channel_name:
        return None
    task = delivery.task
    if delivery.kind != DeliveryKind.CANCEL:
        if task.state in TERMINAL_STATES:
            rows.update(status=DeliveryStatus.CANCELED, closed_reason=f"task {task.state}")
            return None
        if task.agent_id != agent_id:
            rows.update(status=DeliveryStatus.CANCELED, closed_reason="task reassigned")
            return None
    elif task.state not in TERMINAL_STATES and task.agent_id == agent_id:
        # The cancel of a task taken from this agent, given back to it since: it holds the
        # task again, and the cancel (sent before its new assignment) would end it.
        rows.update(status=DeliveryStatus.CANCELED, closed_reason="task given back")
        return None
    claimed = rows.filter(status=delivery.status, channel_name=delivery.channel_name).update(
        status=DeliveryStatus.SENT,
        channel_name=channel_name,
        sent_at=timezone.now(),
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    if delivery.kind != DeliveryKind.CANCEL:
        # An assignment, or a reply that waited offline (gateway.offline.relabel_waiting):
        # the task's time starts now. Whatever the label read above says: the sweep may
        # have labelled the task offline since; only an offline one changes.
        Task.gateway_connected(task.pk)
    return delivery.payload


def undeliverable(delivery_id: str, agent_id: str, size: int) -> None:
    """A claimed delivery whose frame is larger than a WebSocket message may be
    (:data:`MAX_SENT_BYTES`): closed, and its task failed
    ``frame_too_large``. Sent, daphne refused it and the agent never got it: the task
    waited, still SUBMITTED, until its deadline, with nothing saying why."""
    limit = MAX_SENT_BYTES
    with transaction.atomic():
        rows = Delivery.objects.filter(pk=delivery_id, agent_id=agent_id, status__in=OPEN_STATUSES)
        delivery = rows.select_related("task").first()
        if delivery is None:
            return
        rows.update(status=DeliveryStatus.CANCELED, closed_reason="frame too large")
        if delivery.kind == DeliveryKind.CANCEL:
            return
        what = "the task" if delivery.kind == DeliveryKind.ASSIGN else "a reply to the task"
        message = (
            f"The gateway frame of {what} for agent {agent_id} is {size:,} bytes, more than "
            f"a WebSocket message may carry ({limit:,}): it cannot be delivered."
        )
        delivery.task.fail("frame_too_large", message, {"bytes": size, "maxBytes": limit})
    log.warning("gateway: %s for task %s not sent: %s", delivery.kind, delivery.task_id, message)


def ack(agent_id: str, delivery_id: str) -> bool:
    """Mark a delivery acknowledged; False if it already was. Unknown ids raise FrameError."""
    rows = Delivery.objects.filter(pk=delivery_id, agent_id=agent_id)
    if rows.filter(status__in=OPEN_STATUSES).update(
        status=DeliveryStatus.ACKED, acked_at=timezone.now()
    ):
        return True
    if rows.exists():
        return False
    raise FrameError("unknown_delivery", f"No delivery {delivery_id!r} was sent to this agent.")


def apply_update(
    agent_id: str, task_id: str, status: dict[str, Any], artifacts: list[Any] | None
) -> Task:
    """Apply a ``task.update`` frame: the agent's own gateway task only.

    Any update of a task first acknowledges what was sent to the agent for it (it plainly
    received it), also for a task taken from it: its answer to that task's ``task.cancel``
    is accepted and changes nothing. A task that ended takes only its final state again
    (a ``CANCELED`` answering its cancel); anything else is ``invalid_state`` and changes
    nothing. The status then goes through the one mapping shared with A2A polling.
    """
    try:
        task_uuid = uuid.UUID(task_id)
    except ValueError:
        task_uuid = None
    # The compiled read by id (a2a.rows), then the owner check: the ORM's filtered read was
    # compiled anew for every frame.
    task = rows.task(task_uuid) if task_uuid else None
    if task is not None:
        # Before the owner check: a task reassigned away from this agent is no longer its
        # own, and its cancel would be sent again on every reconnect. Only rows sent to
        # this agent, so nothing about another agent's task is disclosed or changed.
        Delivery.objects.filter(
            task_id=task.pk, agent_id=agent_id, status=DeliveryStatus.SENT
        ).update(status=DeliveryStatus.ACKED, acked_at=timezone.now())
    state = normalize_state(status.get("state")) if isinstance(status, dict) else None
    if task is None or task.agent_id != agent_id:
        if task is not None and _answers_cancel(task, agent_id, state):
            return task
        # Same answer for "no such task" and "not yours": existence is not disclosed.
        raise FrameError("task_not_found", f"Task {task_id!r} is not one of this agent's tasks.")
    if task.transport == Transport.A2A:
        raise FrameError(
            "not_gateway_task",
            f"Task {task_id} is served over A2A HTTP; report its status there.",
        )
    if task.state in TERMINAL_STATES and state is not None and state != task.state:
        # A late or duplicate answer (a FAILED after a COMPLETED, a COMPLETED after the
        # offline TTL failed the task): the agent hears that it was not taken.
        raise FrameError(
            "invalid_state",
            f"Task {task_id} already ended in {task.state}; the update was not applied.",
        )
    from a2a import agent_updates

    try:
        return agent_updates.apply_agent_update(
            task, status=status, artifacts=artifacts, via="websocket"
        )
    except PlatformError as exc:
        raise FrameError(exc.code, exc.message) from None


def _answers_cancel(task: Task, agent_id: str, state: str | None) -> bool:
    """Whether an update of a task that is not the agent's (any more) is its ``CANCELED``
    answer to the ``task.cancel`` it was sent when the task was taken from it."""
    return (
        state == TaskState.CANCELED
        and Delivery.objects.filter(
            task_id=task.pk, agent_id=agent_id, kind=DeliveryKind.CANCEL
        ).exists()
    )
