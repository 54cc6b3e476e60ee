"""The face's receiver of ``task_changed``: feeds streams and queues push notifications.

Runs after the commit of every transition, in whatever process made it (a request, a
Celery worker). It reads the task at most once and never raises; it looks for push
configs and (across processes) stream listeners only when the transition says the task
is ``watched``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from a2a.face import push, sse
from a2a.signals import task_changed

log = logging.getLogger(__name__)


@receiver(task_changed, dispatch_uid="a2a.face.on_task_changed")
def on_task_changed(sender: Any, task_id: Any, **kwargs: Any) -> None:
    try:
        # A task nothing but its row follows (``watched`` False) has no config to look up
        # and, with the shared layer, no stream to publish to.
        unwatched = kwargs.get("watched") is False
        config_ids = [] if unwatched else push.enabled_config_ids(task_id)
        streams = sse.has_listeners(task_id, watched=kwargs.get("watched"))
        if not config_ids and not streams:
            return
        snap = sse.snapshot(task_id)
        if snap is None:
            return
        if streams:
            sse.publish_snapshot(task_id, snap)
        if config_ids:
            push.queue_deliveries(config_ids, snap["seq"], snap["task"])
    except Exception:
        log.exception("could not publish the change of task %s", task_id)
