"""What a gateway connection does with the database: start a session, claim and send
deliveries, record acks, apply ``task.update`` frames (the consumer calls these through
``gateway.services`` on a thread pool)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db.models import F
from django.utils import timezone

from a2a import rows
from a2a.models import Task
from a2a.states import TERMINAL_STATES, Transport
from agent_profiles.models import AgentProfile
from gateway import presence
from gateway.frames import FrameError
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


def start_session(agent: AgentProfile, channel_name: str, remote_addr: str) -> list[uuid.UUID]:
    """A connection joined: record its presence, note the agent as seen, return its outbox."""
    presence.register(agent.id, channel_name, remote_addr)
    if agent.gateway_seen_at is None:
        # The agent uses the gateway: its offline tasks may wait for it (OFFLINE_TASK_TTL).
        agent.gateway_seen_at = timezone.now()
        AgentProfile.objects.filter(pk=agent.pk).update(gateway_seen_at=agent.gateway_seen_at)
    seen = agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 60:
        agent.touch()
    return outbox(agent.id, channel_name)


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
    delivery of a task that ended meanwhile is closed instead of sent (cancels still go).
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
    if task.state in TERMINAL_STATES and delivery.kind != DeliveryKind.CANCEL:
        rows.update(status=DeliveryStatus.CANCELED, closed_reason=f"task {task.state}")
        return None
    claimed = rows.filter(status=delivery.status, channel_name=delivery.channel_name).update(
        status=DeliveryStatus.SENT,
        channel_name=channel_name,
        sent_at=timezone.now(),
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    if delivery.kind == DeliveryKind.ASSIGN and task.transport == Transport.OFFLINE:
        Task.gateway_connected(task.pk)
    return delivery.payload


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

    Any update of a task also acknowledges what was sent to the agent for it (it plainly
    received it). The status then goes through the one mapping shared with A2A polling.
    """
    try:
        task_uuid = uuid.UUID(task_id)
    except ValueError:
        task_uuid = None
    # The compiled read by id (a2a.rows), then the owner check: the ORM's filtered read was
    # compiled anew for every frame.
    task = rows.task(task_uuid) if task_uuid else None
    if task is None or task.agent_id != agent_id:
        # Same answer for "no such task" and "not yours": existence is not disclosed.
        raise FrameError("task_not_found", f"Task {task_id!r} is not one of this agent's tasks.")
    if task.transport == Transport.A2A:
        raise FrameError(
            "not_gateway_task",
            f"Task {task_id} is served over A2A HTTP; report its status there.",
        )
    Delivery.objects.filter(task=task, agent_id=agent_id, status=DeliveryStatus.SENT).update(
        status=DeliveryStatus.ACKED, acked_at=timezone.now()
    )
    from a2a import services as a2a_services

    try:
        return a2a_services.apply_agent_update(
            task, status=status, artifacts=artifacts, via="websocket"
        )
    except PlatformError as exc:
        raise FrameError(exc.code, exc.message) from None
