"""AgentGatewayService: deliveries to agents over the WebSocket gateway.

Save first, then push: every frame owed to an agent is a :class:`~gateway.models.Delivery`
row committed before any ``group_send``. The channel-layer message only says "look now";
a connection *claims* the row with a conditional UPDATE before sending it, so with many
connections and many daphne processes a frame goes out once per connection attempt, and
whatever a lost message leaves behind is sent when the agent next connects.

Synchronous functions here are called from Django views, Celery workers and (through
``database_sync_to_async``) from the consumer.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from a2a.models import Task
from a2a.states import TERMINAL_STATES, NextAction, Transport
from agent_profiles.models import AgentProfile, ApiKey
from gateway import frames, notify, presence
from gateway.frames import FrameError
from gateway.models import OPEN_STATUSES, Delivery, DeliveryKind, DeliveryStatus, Presence
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)

CLOSE_BAD_KEY = 4401
CLOSE_DISABLED = 4403

DELIVER_EVENT = "gateway.deliver"


# --- auth ----------------------------------------------------------------------------


def authenticate_key(raw: str | None) -> tuple[AgentProfile | None, int | None]:
    """The agent owning an API key, or the close code to refuse the connection with."""
    if not raw:
        return None, CLOSE_BAD_KEY
    agent = ApiKey.authenticate(raw)
    if agent is None:
        return None, CLOSE_BAD_KEY
    if not agent.is_active:
        return None, CLOSE_DISABLED
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


def _group_send(agent_id: str, event: dict[str, Any]) -> None:
    """Tell the agent's connections (in any process) to look at the outbox now.

    Best effort: a lost hint only delays the delivery until the agent's next connection
    (or the sweep's requeue).
    """
    if not notify.group_send(presence.agent_group(agent_id), event):
        log.info("gateway: agent %s not notified; the delivery waits in the outbox", agent_id)


def _notify_on_commit(delivery: Delivery, *, was_offline: bool = False) -> None:
    """After commit, hint the agent's connections; the frame rides along so the receiving
    connection claims with one UPDATE and sends without reading the row."""
    event = {
        "type": DELIVER_EVENT,
        "delivery_id": str(delivery.id),
        "task_id": str(delivery.task_id),
        "frame": delivery.payload,
        "was_offline": was_offline,
    }
    transaction.on_commit(lambda: _group_send(delivery.agent_id, event))


def _expiry() -> Any:
    return timezone.now() + timedelta(seconds=settings.OFFLINE_TASK_TTL)


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
    is reused, never duplicated), then pushes it to the agent's group after commit.
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
        delivery = Delivery.objects.filter(
            task=task, kind=DeliveryKind.ASSIGN, status__in=OPEN_STATUSES
        ).first()
        if delivery is None:
            delivery = Delivery(task=task, agent_id=task.agent_id, kind=DeliveryKind.ASSIGN)
            delivery.payload = frames.assign(delivery.id, task, outbound_message(task))
            delivery.reason = reason[:500]
            delivery.expires_at = _expiry()
            delivery.save()
        fields = {
            "transport": transport,
            "metadata": _with_fallback(task, transport, reason),
            "next_action": NextAction.NONE,
            "next_poll_at": None,
            "lease_until": None,
            "updated_at": timezone.now(),
        }
        Task.objects.filter(pk=task.pk).update(**fields)
        _notify_on_commit(delivery, was_offline=transport == Transport.OFFLINE)
    log.info("gateway: task %s pushed to %s (%s)", task.id, task.agent_id, transport)
    return str(transport)


def switch_to_gateway(task: Task, *, reason: str) -> str:
    """Move a task the agent holds (over HTTP) to the gateway without a new assignment."""
    transport = Transport.WEBSOCKET if presence.is_online(task.agent_id) else Transport.OFFLINE
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        Task.objects.filter(pk=task.pk).update(
            transport=transport,
            metadata=_with_fallback(task, transport, reason),
            next_action=NextAction.NONE,
            next_poll_at=None,
            lease_until=None,
            updated_at=timezone.now(),
        )
    return str(transport)


def send_followup(task: Task, kind: str, message: dict[str, Any] | None = None) -> str:
    """Send a reply (``kind="message"``) or a cancel (``"cancel"``) to a gateway task.

    Saved first like an assignment and delivered in order after it. Cancelling a task whose
    assignment the agent never received withdraws the assignment instead: there is
    nothing to cancel on the agent's side. Returns ``"websocket"``, ``"offline"`` or
    ``"withdrawn"``.
    """
    if kind not in (DeliveryKind.MESSAGE, DeliveryKind.CANCEL):
        raise ValueError(f"unknown follow-up kind {kind!r}")
    if kind == DeliveryKind.MESSAGE and not isinstance(message, dict):
        raise ValueError("a task.message follow-up needs an A2A Message")
    with transaction.atomic():
        if kind == DeliveryKind.CANCEL:
            withdrawn = Delivery.objects.filter(
                task=task, status=DeliveryStatus.PENDING, kind=DeliveryKind.ASSIGN
            ).update(status=DeliveryStatus.CANCELED, closed_reason="task canceled before delivery")
            if withdrawn:
                Delivery.objects.filter(task=task, status=DeliveryStatus.PENDING).update(
                    status=DeliveryStatus.CANCELED, closed_reason="task canceled before delivery"
                )
                return "withdrawn"
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
        delivery.expires_at = _expiry()
        delivery.save()
        _notify_on_commit(delivery)
    return str(Transport.WEBSOCKET if presence.is_online(task.agent_id) else Transport.OFFLINE)


# --- what a connection does ------------------------------------------------------------


def outbox(agent_id: str) -> list[uuid.UUID]:
    """The agent's open deliveries in sending order: unacked ones first, then pending ones,
    each oldest first (one query)."""
    rows = Delivery.objects.filter(agent_id=agent_id, status__in=OPEN_STATUSES)
    ordered = sorted(rows.values_list("status", "created_at", "id"), key=_outbox_order)
    return [delivery_id for _status, _created, delivery_id in ordered]


def _outbox_order(row: tuple[str, Any, uuid.UUID]) -> tuple[int, Any, str]:
    status, created_at, delivery_id = row
    return (0 if status == DeliveryStatus.SENT else 1, created_at, str(delivery_id))


def start_session(agent: AgentProfile, channel_name: str, remote_addr: str) -> list[uuid.UUID]:
    """A connection joined: record its presence, note the agent as seen, return its outbox."""
    presence.register(agent.id, channel_name, remote_addr)
    seen = agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 60:
        agent.touch()
    return outbox(agent.id)


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
        Task.objects.filter(pk=task_id, transport=Transport.OFFLINE).update(
            transport=Transport.WEBSOCKET
        )
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
        live = presence.fresh_presence().exclude(channel_name=channel_name)
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
        Task.objects.filter(pk=task.pk, transport=Transport.OFFLINE).update(
            transport=Transport.WEBSOCKET
        )
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
    task = Task.objects.filter(pk=task_uuid, agent_id=agent_id).first() if task_uuid else None
    if task is None:
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


# --- offline tasks -------------------------------------------------------------------


def close_open_deliveries(task_id: Any, reason: str) -> int:
    """Withdraw what a finished task still owes its agent (cancels excepted)."""
    return (
        Delivery.objects.filter(task_id=task_id, status__in=OPEN_STATUSES)
        .exclude(kind=DeliveryKind.CANCEL)
        .update(status=DeliveryStatus.CANCELED, closed_reason=reason[:500])
    )


def expire_offline_tasks(limit: int = 500) -> int:
    """Fail tasks whose assignment waited past ``OFFLINE_TASK_TTL``; returns how many."""
    now = timezone.now()
    due = Delivery.objects.filter(
        kind=DeliveryKind.ASSIGN, status__in=OPEN_STATUSES, expires_at__lt=now
    ).select_related("task")[:limit]
    expired = 0
    for delivery in due:
        if not Delivery.objects.filter(pk=delivery.pk, status=delivery.status).update(
            status=DeliveryStatus.EXPIRED, closed_reason="offline TTL passed"
        ):
            continue  # delivered or withdrawn meanwhile
        expired += 1
        task = delivery.task
        if task.state in TERMINAL_STATES:
            continue
        hours = settings.OFFLINE_TASK_TTL / 3600
        if delivery.status == DeliveryStatus.PENDING:
            message = (
                f"Agent {task.agent_id} did not connect to the gateway within "
                f"{hours:g} h; the task was never delivered."
            )
        else:
            message = (
                f"Agent {task.agent_id} received the task over the gateway but did not "
                f"acknowledge it within {hours:g} h."
            )
        task.fail("offline_expired", message)
    return expired


def requeue_orphaned(limit: int = 500) -> int:
    """Put back deliveries sent on a connection that died without a clean close.

    A daphne crash leaves them ``sent`` to a channel nobody holds; once that connection's
    presence is gone (stale or deleted), they become ``pending`` again and the agent's live
    connections, in any process, are told to take them.
    """
    live = Presence.objects.values("channel_name")
    grace = timezone.now() - timedelta(seconds=settings.GATEWAY_HEARTBEAT_TIMEOUT)
    orphaned = list(
        Delivery.objects.filter(status=DeliveryStatus.SENT, sent_at__lt=grace)
        .exclude(channel_name__in=live)
        .values_list("id", "agent_id", "channel_name")[:limit]
    )
    requeued = 0
    for delivery_id, agent_id, channel_name in orphaned:
        if Delivery.objects.filter(
            pk=delivery_id, status=DeliveryStatus.SENT, channel_name=channel_name
        ).update(status=DeliveryStatus.PENDING, channel_name=""):
            requeued += 1
            _group_send(agent_id, {"type": DELIVER_EVENT, "delivery_id": str(delivery_id)})
    return requeued


def renotify_pending(limit: int = 1000) -> int:
    """Hint again about pending deliveries of online agents (a lost hint only delays)."""
    grace = timezone.now() - timedelta(seconds=min(settings.GATEWAY_SWEEP_INTERVAL, 10.0))
    rows = (
        Delivery.objects.filter(
            status=DeliveryStatus.PENDING,
            created_at__lt=grace,
            agent_id__in=presence.fresh_presence().values("agent_id"),
        )
        .order_by("created_at")
        .values_list("id", "agent_id")[:limit]
    )
    count = 0
    for delivery_id, agent_id in rows:
        _group_send(agent_id, {"type": DELIVER_EVENT, "delivery_id": str(delivery_id)})
        count += 1
    return count


def requeue_offline(delivery: Delivery) -> bool:
    """Admin: restart an offline task's expiry clock and push it again now."""
    now = timezone.now()
    with transaction.atomic():
        changed = Delivery.objects.filter(pk=delivery.pk, status__in=OPEN_STATUSES).update(
            status=DeliveryStatus.PENDING, channel_name="", queued_at=now, expires_at=_expiry()
        )
        if changed:
            _notify_on_commit(delivery)
    return bool(changed)


def cancel_offline(delivery: Delivery, *, by: Any = None) -> bool:
    """Admin: cancel the task of an offline delivery (the unsent assignment is withdrawn)."""
    from a2a.services import cancel_task

    task = Task.objects.get(pk=delivery.task_id)
    if task.state in TERMINAL_STATES:
        close_open_deliveries(task.pk, f"task {task.state}")
        return False
    cancel_task(task, by=by, reason="canceled by an operator while waiting offline")
    return True


def drop_stale_presence() -> int:
    return presence.drop_stale()


def disconnect_agent(agent_id: str, code: int = CLOSE_DISABLED) -> None:
    """Close every gateway connection of an agent, in any process (after commit)."""
    if not Presence.objects.filter(agent_id=agent_id).exists():
        return
    transaction.on_commit(lambda: _group_send(agent_id, {"type": "gateway.close", "code": code}))
