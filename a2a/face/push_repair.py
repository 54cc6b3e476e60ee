"""Push notifications whose delivery row was never written: found and queued by the sweep.

A transition commits first; its push deliveries are written after the commit, by the
``task_changed`` receiver (:mod:`a2a.face.signals`), in whatever process made the change.
A process killed between the two (or a database error in the receiver, which logs it and
carries on) left the change with no delivery row, and nothing looked again: the client
never heard of it. The delivery sweep (:func:`a2a.face.push.sweep_push`) therefore also
looks for configs whose task changed, while the config existed, more than
:data:`GRACE_SECONDS` ago and within :data:`WINDOW_SECONDS`, with no delivery of the
task's latest event; each gets that event's delivery (the task as it is now, which is that
event's state: nothing changed it since). Deliveries are unique per config and event, so a
late receiver and the sweep never make two.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db.models import Count, Exists, F, OuterRef
from django.utils import timezone

from a2a.face import sse
from a2a.models import Task
from a2a.push_models import PushDelivery, PushNotificationConfig

log = logging.getLogger(__name__)

GRACE_SECONDS = 30.0  # the receiver writes within milliseconds of the commit
WINDOW_SECONDS = 6 * 3600.0  # how far back a missed change is looked for
BATCH = 200


def missed() -> list[tuple[int, Any]]:
    """``(config id, task id)`` of enabled configs whose task's latest change has no
    delivery (changed after the config was created, within the window, past the grace)."""
    now = timezone.now()
    seq = Task.objects.filter(pk=OuterRef("task_id")).annotate(n=Count("events")).values("n")
    delivered = PushDelivery.objects.filter(config=OuterRef("pk"), seq=OuterRef("seq"))
    rows = (
        PushNotificationConfig.objects.filter(
            enabled=True,
            task__state_changed_at__gt=F("created_at"),
            task__state_changed_at__gte=now - timedelta(seconds=WINDOW_SECONDS),
            task__state_changed_at__lte=now - timedelta(seconds=GRACE_SECONDS),
        )
        .annotate(seq=seq)
        .filter(~Exists(delivered))
        .values_list("pk", "task_id")[:BATCH]
    )
    return list(rows)


def queue_missed() -> int:
    """Queue the delivery of every missed change (see the module); how many."""
    from a2a.face.push import queue_deliveries

    queued = 0
    for config_id, task_id in missed():
        snap = sse.snapshot(task_id)
        if snap is None:
            continue
        log.warning(
            "push config %s of task %s: no delivery of its change %d; queued now",
            config_id,
            task_id,
            snap["seq"],
        )
        queue_deliveries([config_id], snap["seq"], snap["task"])
        queued += 1
    return queued
