"""The gateway's rows: who is connected (presence) and what was sent to whom (deliveries).

Shape (documented in docs/gateway.md):

* :class:`Presence` — one row per open WebSocket connection. Every daphne process refreshes
  the ``last_heartbeat_at`` of its own connections; a row whose heartbeat is older than
  ``GATEWAY_HEARTBEAT_TIMEOUT`` no longer counts as online, so a crashed daphne cannot
  leave its agents "online" (the sweep deletes such rows).
* :class:`Delivery` — one frame the platform owes an agent (``task.assign``,
  ``task.message`` or ``task.cancel``). It is saved BEFORE any ``group_send``: the row is
  the truth, the channel-layer message only a hint to send now. Its ``status`` walks
  ``pending`` (no connection took it yet) → ``sent`` (a connection claimed and sent it)
  → ``acked``; or ends as ``canceled`` / ``expired``.
* :class:`OfflineTask` — not a separate table: the pending-undelivered side of a
  delivery. A proxy of :class:`Delivery` limited to assignments no connection has taken
  (the task waits for its agent), so there is exactly one row per waiting task and
  nothing to keep in sync.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from a2a.models import Task
from agent_profiles.models import AgentProfile


class Presence(models.Model):
    """One open gateway connection of an agent, refreshed by its daphne process."""

    agent = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="presences")
    # The Channels channel name of the connection: unique, and what group_send reaches.
    channel_name = models.CharField(max_length=200, unique=True)
    # "host:pid:random" of the daphne process holding the socket.
    server_id = models.CharField(max_length=200, db_index=True)
    remote_addr = models.CharField(max_length=100, blank=True)
    connected_at = models.DateTimeField(default=timezone.now)
    last_heartbeat_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["agent_id", "connected_at"]
        verbose_name_plural = "presence"

    def __str__(self) -> str:
        return f"{self.agent_id} on {self.server_id}"


class DeliveryKind(models.TextChoices):
    ASSIGN = "assign", "task.assign"
    MESSAGE = "message", "task.message"
    CANCEL = "cancel", "task.cancel"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending (agent offline)"
    SENT = "sent", "Sent, waiting for the ack"
    ACKED = "acked", "Acknowledged"
    CANCELED = "canceled", "Canceled"
    EXPIRED = "expired", "Expired"


# Deliveries the platform still owes the agent: resent when it (re)connects.
OPEN_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.SENT)


class Delivery(models.Model):
    """One frame owed to an agent over the gateway, saved before it is pushed.

    ``id`` is the ``deliveryId`` the agent acknowledges. ``payload`` is the exact frame
    (including ``deliveryId``), so a resend is byte-for-byte the first send.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="deliveries")
    # No index of its own: "delivery_outbox" leads with it (see Meta).
    agent = models.ForeignKey(
        AgentProfile, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    kind = models.CharField(max_length=16, choices=DeliveryKind.choices)
    payload = models.JSONField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When the delivery was (re)queued: the offline TTL counts from here.
    queued_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # The connection that last claimed and sent it (a resend goes to a new connection).
    channel_name = models.CharField(max_length=200, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    closed_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["created_at"]
        verbose_name_plural = "deliveries"
        # Plain indexes, not db_index: see platform_site.migration_ops (no "_like" copies
        # on PostgreSQL, written at every delivery and every change of its status).
        indexes = [
            models.Index(fields=["agent", "status", "created_at"], name="delivery_outbox"),
            models.Index(fields=["status"], name="delivery_status"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.task_id} → {self.agent_id} ({self.status})"

    @property
    def frame_type(self) -> str:
        return str(self.payload.get("type", ""))


class OfflineTaskManager(models.Manager["OfflineTask"]):
    def get_queryset(self) -> models.QuerySet[OfflineTask]:
        return (
            super().get_queryset().filter(kind=DeliveryKind.ASSIGN, status=DeliveryStatus.PENDING)
        )


class OfflineTask(Delivery):
    """A task waiting for its agent to connect: an assignment no connection has taken.

    Expires ``OFFLINE_TASK_TTL`` seconds after it was queued; the task then FAILS with
    code ``offline_expired``. The admin lists these per agent and can requeue or cancel.
    """

    objects = OfflineTaskManager()

    class Meta:
        proxy = True
        ordering = ["created_at"]
        verbose_name = "offline task"

    @property
    def age_seconds(self) -> float:
        return (timezone.now() - self.queued_at).total_seconds()
