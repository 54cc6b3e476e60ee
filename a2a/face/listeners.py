"""Which tasks someone streams, across processes: a marker per task in Redis.

With the Redis channel layer, a task's stream subscribers may sit in any daphne process,
so without this every transition anywhere read a snapshot of its task and published it
to a group nobody had joined (a sixth of a worker's CPU per instant task, profiled).
A subscriber marks its task (``SET ... EX``) when it opens and again while it waits; the
publisher reads the task and publishes only when the marker exists.

Nothing is lost by a stale answer: a marker that outlives its subscriber costs one
useless publish, and subscribers re-read the row whenever their group stays quiet
(``A2A_STREAM_RECHECK``). The subscriber marks *before* reading its first snapshot, so a
transition committed before the mark is in that snapshot, and one committed after it
finds the mark. When Redis cannot answer, the publisher assumes a listener. Before the
Redis mark the subscriber marks the task's row (``Task.watched``, unless it already says
so): a transition that returns False was written before that, and is in the snapshot,
so the publisher asks Redis only about watched tasks.
"""

from __future__ import annotations

import logging
import time
import uuid

import redis
from django.conf import settings

from platform_site import redis_clients

log = logging.getLogger(__name__)


def _redis() -> redis.Redis:
    return redis_clients.shared(socket_timeout=1.0)


def _key(task_id: uuid.UUID | str) -> str:
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"].get("prefix", "asgi")
    return f"{prefix}:streamed:{uuid.UUID(str(task_id)).hex}"


def ttl_seconds() -> float:
    """How long one mark lasts: a few quiet-stream re-checks."""
    return 3 * float(settings.A2A_STREAM_RECHECK) + 5.0


def mark(task_id: uuid.UUID | str) -> None:
    """Say that a subscriber of this process listens to the task (blocking: call it off
    the event loop)."""
    try:
        _redis().set(_key(task_id), b"1", px=int(ttl_seconds() * 1000))
    except redis.RedisError as exc:
        log.warning("could not mark task %s as streamed: %s", task_id, exc)


def is_marked(task_id: uuid.UUID | str) -> bool:
    """Whether some subscriber may listen to the task (True when Redis cannot say)."""
    try:
        return bool(_redis().exists(_key(task_id)))
    except redis.RedisError:
        return True


class Marker:
    """Keeps one subscription's mark fresh: :meth:`due` says when to mark again."""

    def __init__(self) -> None:
        self.marked_at = float("-inf")

    def due(self) -> bool:
        return time.monotonic() - self.marked_at >= ttl_seconds() / 3

    def done(self) -> None:
        self.marked_at = time.monotonic()
