"""The gateway's metrics and lifecycle log lines: sockets opened and closed, frames handed
to agents, and the offline queue's depth (read from the database at scrape time)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db.models import Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from platform_site import metrics

log = logging.getLogger("gateway.lifecycle")


def connected(agent_id: str, remote_addr: str) -> None:
    metrics.GATEWAY_SOCKETS.inc()
    metrics.GATEWAY_CONNECTIONS.labels("accepted").inc()
    log.info(
        "agent %s connected to the gateway from %s",
        agent_id,
        remote_addr or "?",
        extra={"agent_id": agent_id},
    )


def disconnected(agent_id: str, code: int | None) -> None:
    metrics.GATEWAY_SOCKETS.dec()
    log.info(
        "agent %s disconnected from the gateway (code %s)",
        agent_id,
        code,
        extra={"agent_id": agent_id},
    )


def refused(code: int) -> None:
    metrics.GATEWAY_CONNECTIONS.labels(f"refused_{code}").inc()


def handed(task_id: str, agent_id: str, kind: str, outcome: str, reason: str = "") -> None:
    """A frame for an agent left on a socket (``websocket``) or waits (``offline``)."""
    metrics.GATEWAY_DELIVERIES.labels(kind, outcome).inc()
    if kind == "assign":
        log.info(
            "task %s handed to the gateway for %s (%s)%s",
            task_id,
            agent_id,
            outcome,
            f": {reason}" if reason else "",
            extra={"task_id": task_id, "agent_id": agent_id},
        )


def offline_gauges() -> Iterable[Metric]:
    from gateway.models import OfflineTask

    queued = OfflineTask.objects.aggregate(oldest=Min("queued_at"))
    depth = OfflineTask.objects.count()
    yield GaugeMetricFamily(
        "a2a_gateway_offline_tasks", "Tasks queued for agents not connected.", value=depth
    )
    oldest = queued["oldest"]
    yield GaugeMetricFamily(
        "a2a_gateway_offline_oldest_seconds",
        "Age of the oldest offline task; 0 when none waits.",
        value=(timezone.now() - oldest).total_seconds() if oldest else 0.0,
    )


metrics.add_scrape_collector(offline_gauges)
