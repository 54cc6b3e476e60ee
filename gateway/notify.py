"""Channel-layer sends from synchronous code (Celery workers, request threads).

Sends go through the process's one background loop (:mod:`platform_site.layer_loop`). In
the embedded mode the in-memory layer's queues belong to the loop the consumers run on, so
sends go to that loop instead.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gateway import presence
from gateway.connections import local
from gateway.models import Delivery
from platform_site.layer_loop import sender

log = logging.getLogger(__name__)

# The channel-layer event that tells a connection to look at its outbox now.
DELIVER_EVENT = "gateway.deliver"


def group_send(group: str, event: dict[str, Any], timeout: float = 5.0) -> bool:
    """Send ``event`` to ``group`` from synchronous code; False if it could not be sent."""
    layer = get_channel_layer()
    if layer is None:
        return False
    consumers_loop = local.loop
    sent: Future[None]
    if isinstance(layer, InMemoryChannelLayer):
        if consumers_loop is None or not consumers_loop.is_running():
            return False  # no consumer in this process: nobody could receive it
        sent = asyncio.run_coroutine_threadsafe(layer.group_send(group, event), consumers_loop)
    else:
        # Through the sender's turns: its bound on sends in flight holds for hints too, and
        # an agent's hints leave in order.
        sent = sender.submit(layer.group_send(group, event), key=group)
    try:
        sent.result(timeout)
    except Exception:
        # A send still running (a stalled Redis: until its socket timeout) is cancelled:
        # each caller went on to its next hint and they piled up. Cancelling drops only
        # this hint (best effort); the key's later sends keep their order.
        sent.cancel()
        log.warning("gateway: group_send to %s failed", group, exc_info=True)
        return False
    return True


def group_send_to_agent(agent_id: str, event: dict[str, Any]) -> None:
    """Tell the agent's connections (in any process) to look at the outbox now.

    Best effort: a lost hint only delays the delivery until the agent's next connection
    (or the sweep's requeue).
    """
    if not group_send(presence.agent_group(agent_id), event):
        log.info("gateway: agent %s not notified; the delivery waits in the outbox", agent_id)


def notify_on_commit(delivery: Delivery, *, was_offline: bool = False) -> None:
    """After commit, hint the agent's connections; the frame rides along so the receiving
    connection claims with one UPDATE and sends without reading the row."""
    event = {
        "type": DELIVER_EVENT,
        "delivery_id": str(delivery.id),
        "task_id": str(delivery.task_id),
        "frame": delivery.payload,
        "was_offline": was_offline,
    }
    transaction.on_commit(lambda: group_send_to_agent(delivery.agent_id, event))


def expiry() -> datetime:
    """When a delivery queued now expires (``OFFLINE_TASK_TTL``)."""
    return timezone.now() + timedelta(seconds=settings.OFFLINE_TASK_TTL)
