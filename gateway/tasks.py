"""Celery tasks of the gateway: the periodic sweep (beat, GATEWAY_SWEEP_INTERVAL)."""

from __future__ import annotations

from celery import shared_task

from gateway import offline


@shared_task(name="gateway.tasks.sweep", soft_time_limit=60, time_limit=90, ignore_result=True)
def sweep() -> dict[str, int]:
    """Expire offline tasks past OFFLINE_TASK_TTL, drop presence of dead processes and
    requeue what was sent on their connections, label offline the tasks pushed as their
    agent's connection closed, and hint again about pending deliveries of online agents
    (a lost channel-layer message only delays a delivery).

    Idempotent: every step is a conditional update, safe to run twice or concurrently.
    """
    return {
        "expired": offline.expire_offline_tasks(),
        "stale_presence": offline.drop_stale_presence(),
        "requeued": offline.requeue_orphaned(),
        "relabeled": offline.relabel_undelivered(),
        "renotified": offline.renotify_pending(),
    }
