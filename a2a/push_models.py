"""Push notification configs of the A2A face and the record of every delivery attempt.

Imported by :mod:`a2a.models` so Django registers them in the ``a2a`` app.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


def new_config_id() -> str:
    return uuid.uuid4().hex


class PushProtocol(models.TextChoices):
    """The A2A version whose method stored a config: its webhook expects that version's
    notification (1.0: a ``StreamResponse``; 0.3: the bare 0.3 ``Task``)."""

    V1_0 = "1.0", "A2A 1.0"
    V0_3 = "0.3", "A2A 0.3"


class PushNotificationConfig(models.Model):
    """A client's webhook for one task: every state change is POSTed to ``url``."""

    task = models.ForeignKey("a2a.Task", on_delete=models.CASCADE, related_name="push_configs")
    # The A2A config id (client-chosen or generated), unique per task.
    config_id = models.CharField(max_length=200, default=new_config_id)
    url = models.URLField(max_length=2000)
    token = models.CharField(max_length=1000, blank=True)
    auth_scheme = models.CharField(max_length=100, blank=True)
    auth_credentials = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Which version's method set it (configs stored before this field are 1.0's): a 0.3
    # client's webhook cannot parse a 1.0 payload.
    protocol_version = models.CharField(
        max_length=8,
        choices=PushProtocol.choices,
        default=PushProtocol.V1_0,
        db_default=PushProtocol.V1_0,
    )

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="push_config_per_task")
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id} → {self.url}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (attempts exhausted or config disabled)"
    SUPERSEDED = "superseded", "Superseded (a later event was delivered first)"


class PushDelivery(models.Model):
    """One task event (``seq``) to POST to one config: the payload, every attempt's outcome
    and when the next attempt is due. A periodic sweep re-queues overdue ones."""

    config = models.ForeignKey(
        PushNotificationConfig, on_delete=models.CASCADE, related_name="deliveries"
    )
    seq = models.PositiveIntegerField()
    task_state = models.CharField(max_length=32)
    payload = models.JSONField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["config", "seq"], name="push_delivery_per_event")
        ]

    def __str__(self) -> str:
        return f"{self.config_id}#{self.seq} {self.status} x{self.attempts}"
