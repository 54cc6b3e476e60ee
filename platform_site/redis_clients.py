"""The process's Redis clients for the platform's own keys (not Celery's, not Channels').

One client per read timeout, made on first use and shared by threads (redis-py's
connection pool is thread-safe and made again after a fork).
"""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_lock = threading.Lock()
_clients: dict[float, redis.Redis] = {}


def shared(socket_timeout: float) -> redis.Redis:
    """The client for ``settings.REDIS_URL`` whose reads wait at most ``socket_timeout``
    seconds (a blocking pop needs longer than its own wait)."""
    with _lock:
        client = _clients.get(socket_timeout)
        if client is None:
            client = _clients[socket_timeout] = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=socket_timeout, socket_connect_timeout=1.0
            )
        return client
