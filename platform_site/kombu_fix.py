"""A guard for a kombu Redis-transport bug that made Celery workers exit on broker outages.

The bug (kombu 5.7.0 with celery 5.7.0, the newest releases; the traceback of kombu issues
#970 and #582): when Redis drops while a worker holds received, unacknowledged messages
*and* its channel is waiting in BRPOP, Celery's consumer runs
``on_connection_error_after_connected``:

1. ``connection.collect()`` closes the default channel; the close fails half-way on the
   dead socket (a ``ConnectionError``, swallowed), then ``_do_close_transport()`` sets
   ``transport.client = None``;
2. ``connection.close()`` closes the same channel again; this time it reaches
   ``QoS.restore_unacked_once()``, which needs a Redis client; the pool was dropped in
   step 1, so kombu builds a new one from ``Channel._connparams()``, which reads
   ``self.connection.client.hostname`` → ``AttributeError: 'NoneType' object has no
   attribute 'hostname'``.

``AttributeError`` is not one of the transport's connection errors, so ``ignore_errors``
does not swallow it and the worker logs ``Unrecoverable error`` and exits (reproduced:
2 unacked messages, Redis down for 5 s → worker dead; tests/test_faults_broker.py).
No setting avoids it (``broker_connection_retry``, ``acks_late``, visibility
timeouts and ``worker_cancel_long_running_tasks_on_connection_loss`` all act later).

The guard: a channel whose transport was detached from its connection raises the
transport's own ``ConnectionError`` instead, which kombu and Celery already treat as
"the broker is gone" (swallowed on close, retried on reconnect). Nothing is lost that
mattered: the unacknowledged messages stay in Redis's ``unacked`` hash (redelivered after
the visibility timeout when Redis kept its data) and, above all, the database is the
source of truth: the beat's sweeps re-drive every overdue task (DESIGN.md, Principles).
Remove this module once kombu checks for a detached transport itself.
"""

from __future__ import annotations

import functools
from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

_MARK = "_platform_detached_guard"


def install() -> None:
    """Wrap ``kombu.transport.redis.Channel._connparams`` once (idempotent)."""
    original = kombu_redis.Channel._connparams
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        transport = getattr(self, "connection", None)
        if transport is None or getattr(transport, "client", None) is None:
            raise RedisConnectionError(
                "The broker connection was closed (kombu channel detached from its "
                "connection); the worker reconnects."
            )
        return original(self, asynchronous=asynchronous)

    setattr(_connparams, _MARK, True)
    kombu_redis.Channel._connparams = _connparams
