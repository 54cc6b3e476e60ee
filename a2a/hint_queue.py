"""The distributed mode's short cut for starting tasks: a Redis list, not a Celery message.

In the distributed mode a new task (a reply, a cancel, a retry) was handed to a worker as
a Celery message. A py-spy profile of instant tasks put publishing it at about a fifth of
the API process's CPU and handling it at about a third of the worker's (kombu's message,
the consumer, the task tracer, the acknowledgement), for a hint the row already gives:
the task is due in the database, and a lost hint only waits for the next sweep.

So the senders push the ids onto one Redis list (:func:`publish`: one round trip, after
the commit), and every Celery worker process runs a :class:`Listener` thread that pops
them (``BLPOP``, then up to a batch more), claims the batch in one statement
(:meth:`Task.claim_many`) and starts its tasks on the process's own threads
(:mod:`a2a.local_dispatch`). A listener takes only what its threads can start soon, so
several worker processes share the work and a busy one leaves the rest to the others.

Guarantees, as with the message: the row is the truth. A hint popped by a worker that is
killed before it acts is lost, and the sweep acts on the due row; a hint acted on twice
is harmless, since a claim is a compare-and-set. Senders use the list only while a
listener says it is alive (each listener keeps its own entry in a sorted set, scored with
the time until which it vouches for itself, refreshed every second and removed when it
stops; a sender reads it at most once a second per process); otherwise, or when Redis
fails, the Celery message is sent as before.
Delayed hints (a retry in N seconds), long calls and the sweep stay with Celery.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import Any

import redis
from django.conf import settings
from django.db import connections

from a2a import local_dispatch
from a2a.models import Task
from platform_site import redis_clients
from platform_site.dbthreads import tidy_connections
from platform_site.metrics import cpu_stage

log = logging.getLogger(__name__)

# Hints beyond this many waiting are dropped, oldest first: with no listener draining the
# list (every worker stopped) it must not grow without bound; the sweep acts on the rows.
MAX_WAITING = 100_000
ALIVE_SECONDS = 5.0  # a listener's entry outlives a few missed refreshes
CHECK_SECONDS = 1.0  # how long a sender trusts what it read of the mark

_alive: tuple[float, bool] = (0.0, False)


def _redis() -> redis.Redis:
    # The listener's: longer than BLPOP's one-second wait.
    return redis_clients.shared(socket_timeout=5.0)


def _sender() -> redis.Redis:
    # A sender's: it publishes after the commit of a request that creates a task, which
    # waits for it. An RPUSH answers in a millisecond; a stalled Redis (a frozen host, a
    # partition: connections open, no answer) cost each creation five seconds.
    return redis_clients.shared(socket_timeout=1.0)


def key() -> str:
    """The list of one deployment (its Celery queue's name keeps deployments apart)."""
    return f"a2a:hints:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def _listeners_key() -> str:
    return f"{key()}:listeners"


def enabled() -> bool:
    """Whether hints may go through the list here (distributed mode, not switched off)."""
    return bool(settings.DISTRIBUTED and settings.A2A_HINT_QUEUE)


def _listener_alive(client: redis.Redis) -> bool:
    global _alive
    checked_at, alive = _alive
    now = time.monotonic()
    if now - checked_at < CHECK_SECONDS:
        return alive
    alive = bool(client.zcount(_listeners_key(), time.time(), "+inf"))
    _alive = (now, alive)
    return alive


def forget_listeners() -> None:
    """Read the listeners again on the next publish (this process's listener stopped)."""
    global _alive
    _alive = (0.0, False)


def publish(task_ids: list[Any]) -> bool:
    """Hand these tasks to a listening worker; False when the caller should send the
    Celery message instead (not distributed, no listener alive, Redis failing)."""
    if not task_ids or not enabled():
        return False
    global _alive
    try:
        client = _sender()
        if not _listener_alive(client):
            return False
        pipe = client.pipeline(transaction=False)
        pipe.rpush(key(), *[str(pk) for pk in task_ids])
        pipe.ltrim(key(), -MAX_WAITING, -1)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("could not publish %d hint(s) to Redis: %s", len(task_ids), exc)
        # The next senders go to Celery for a while, not each through the same wait.
        _alive = (time.monotonic(), False)
        return False
    return True


class Listener:
    """Pops hints and starts their tasks on this process's threads, while it runs."""

    def __init__(self, threads: int, batch: int = 32) -> None:
        self.threads = max(1, threads)
        self.batch = max(1, batch)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._marked_at = 0.0
        self.name = uuid.uuid4().hex

    def start(self) -> None:
        """Start the threads; senders see this listener as soon as this returns."""
        local_dispatch.start(self.threads)
        try:
            self._mark(_redis())
        except redis.RedisError as exc:  # the loop keeps trying
            log.warning("hint listener: Redis failed (%s)", exc)
        self._thread = threading.Thread(target=self._loop, name="a2a-hints", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop popping, then let running tasks end; what waits for a thread stays due."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(redis.RedisError):  # else the entry runs out by itself
            _redis().zrem(_listeners_key(), self.name)
        forget_listeners()
        local_dispatch.stop()

    def _mark(self, client: redis.Redis) -> None:
        """Vouch for this listener for the next few seconds."""
        listeners, wall = _listeners_key(), time.time()
        pipe = client.pipeline(transaction=False)
        pipe.zadd(listeners, {self.name: wall + ALIVE_SECONDS})
        pipe.zremrangebyscore(listeners, "-inf", wall - 60)  # killed listeners' entries
        pipe.execute()
        self._marked_at = time.monotonic()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._once(_redis())
                except redis.RedisError as exc:
                    log.warning("hint listener: Redis failed (%s); retrying in 1 s", exc)
                    self._stop.wait(1.0)
                except Exception:  # a bug, or the database failing: the sweep still runs
                    log.exception("hint listener: unexpected error")
                    self._stop.wait(1.0)
        finally:
            connections.close_all()  # this thread's, opened by its claims

    def _once(self, client: redis.Redis) -> None:
        if time.monotonic() - self._marked_at >= 1.0:
            self._mark(client)
        room = 2 * self.threads - local_dispatch.pending()
        if room <= 0:  # busy: leave the hints to the other workers for now
            self._stop.wait(0.02)
            return
        first = client.blpop([key()], timeout=1)
        if first is None:
            return
        ids = [first[1]]
        more = min(room, self.batch) - 1
        if more > 0:
            ids += client.lpop(key(), more) or []
        tidy_connections()  # this thread keeps its connection from one batch to the next
        with cpu_stage("worker"):
            # One claim for the batch (one statement on PostgreSQL), not one per task on
            # the threads; a hint whose task is not due (or not free) claims nothing.
            claimed = Task.claim_many(_task_ids(ids))
        local_dispatch.start_claimed(claimed)


def _task_ids(raw: list[bytes]) -> list[uuid.UUID]:
    """The task ids among popped hints; anything else is dropped with a warning (only
    this platform writes the list, but one bad entry must not cost the batch)."""
    ids = []
    for entry in raw:
        try:
            ids.append(uuid.UUID(entry.decode()))
        except (UnicodeDecodeError, ValueError):
            log.warning("hint listener: dropped a hint that is not a task id: %r", entry[:80])
    return ids


_listener: Listener | None = None


def start_listening(**_: Any) -> None:
    """Celery's ``worker_ready``: listen in this worker process (distributed mode only)."""
    global _listener
    if not enabled() or _listener is not None:
        return
    _listener = Listener(settings.A2A_HINT_THREADS)
    _listener.start()
    log.info("listening for task hints on %s (%d threads)", key(), _listener.threads)


def stop_listening(**_: Any) -> None:
    """Celery's ``worker_shutdown``: stop listening."""
    global _listener
    listener, _listener = _listener, None
    if listener is not None:
        listener.stop()
