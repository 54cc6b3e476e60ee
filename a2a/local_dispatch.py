"""The embedded mode's short cut for starting tasks: this process's threads, no Celery message.

In the embedded mode the API and the worker share one process, and Celery runs there on
its memory broker. Handing each new task to that worker as a Celery message cost about a
sixth of the process's CPU in a py-spy profile of instant tasks (publishing the message,
the consumer's polling loop, the task tracer), for nothing the database does not already
give: the row is the truth, and a hint that is lost only waits for the next sweep.

So while the embedded worker runs (it starts this module through
:func:`platform_site.embedded.register_service`), :func:`submit` puts the tasks to act on
at once (a new task, a reply, a cancel, a retry) straight onto a pool of threads here.
A distributed worker process runs the same pool for the hints it pops from Redis
(:mod:`a2a.hint_queue`). Everywhere else (the API processes, management commands, tests
without a running platform) it declines, and the caller publishes the hint otherwise.
Delayed hints (a retry in N seconds) and the sweep stay with Celery. Long calls (a
stream followed to its end, a held send) get threads of their own meanwhile
(:mod:`a2a.long_calls`), so they never take these; a send found to last (an agent that
holds it: :mod:`a2a.send_watch`) steps aside from the pool, and a new thread takes its
place (:mod:`platform_site.elastic_pool`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from a2a import long_calls
from a2a.models import Task
from a2a.tasks import process_on_pool_thread
from platform_site.elastic_pool import ElasticPool

log = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ElasticPool | None = None


def start(threads: int | None = None) -> None:
    """Accept work from now on (``threads``, else ``A2A_EMBEDDED_THREADS`` threads)."""
    global _pool
    width = threads if threads is not None else settings.A2A_EMBEDDED_THREADS
    with _lock:
        if _pool is None:
            _pool = ElasticPool(width, "a2a-local", _run, on_drop=_dropped)
    long_calls.start()  # streams and held sends must not take these threads


def pending() -> int:
    """Tasks submitted here that have not finished (waiting for a thread or running), but
    for those whose thread stepped aside."""
    pool = _pool
    return pool.pending() if pool is not None else 0


def stop() -> None:
    """Accept no more work, let running calls end and close the threads' connections.

    Tasks still waiting for a thread are not started: their rows stay due, and the sweep
    of the next start (or of another process) acts on them.
    """
    global _pool
    long_calls.stop()
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.stop()


def submit(task_ids: list[Any]) -> bool:
    """Act on these tasks on this process's threads; False when no pool runs here."""
    pool = _pool
    if pool is None:
        return False
    try:
        for task_id in task_ids:
            pool.submit(str(task_id))
    except RuntimeError:  # stopped between the check and the submit: the sweep will act
        return True
    return True


def starts_soon(count: int) -> bool:
    """Whether this process starts tasks on its own threads and would start ``count`` more
    within two rounds of the jobs they run: new tasks created here are then claimed at
    birth (:mod:`a2a.hints`). Behind a longer queue they go in unclaimed, so the sweep
    can take them up after ``A2A_HINT_GRACE`` rather than after their leases."""
    pool = _pool
    return pool is not None and pool.has_room(count, rounds=2)


def start_claimed(tasks: list[Task]) -> None:
    """Start these tasks on this pool as they are: claimed by this process a moment ago,
    each object for one thread alone (new tasks claimed at birth: :mod:`a2a.hints`; a
    batch of hints claimed at once: :mod:`a2a.hint_queue`). Where the pool stopped
    meanwhile, their claims are given up at once for the sweep."""
    pool = _pool
    for n, task in enumerate(tasks):
        try:
            if pool is None:
                raise RuntimeError("no pool")
            pool.submit(task)
        except RuntimeError:  # stopping: leave these to the sweep, not to their leases
            give_up(tasks[n:])
            return


def give_up(tasks: list[Task]) -> None:
    """Give up the claims of tasks claimed here that will not start here, for the sweep
    to act on at once rather than when their leases run out."""
    for task in tasks:
        try:
            task.release(held=task.lease_until)
        except Exception:  # its lease runs out instead: delayed, not lost
            log.warning("task %s: could not give up its claim", task.pk, exc_info=True)


def has_room() -> bool:
    """Whether a task handed over now (:func:`take_claimed`) would start at once."""
    pool = _pool
    return pool is not None and pool.has_room()


def take_claimed(task_id: Any, lease: str) -> bool:
    """Run a task claimed elsewhere in this process (by the sweep) on this pool, holding
    its claim (``lease``, an ISO time); False when no pool runs here (the caller runs it
    itself). A claim that runs out meanwhile is not taken over: another worker may have
    the task (delayed, never run twice)."""
    pool = _pool
    if pool is None:
        return False
    try:
        pool.submit((str(task_id), lease))
    except RuntimeError:  # stopped meanwhile
        return False
    return True


def _dropped(items: list[Any]) -> None:
    """Items a stopping pool will not run (queued behind its busy threads at a graceful
    stop): give up the claims taken for them, tasks claimed here (at birth, by a hint
    batch) and claims handed over by the sweep, so that the next start or another worker
    acts on them at once. Kept, each waited out its lease after every clean restart."""
    claimed = [item for item in items if isinstance(item, Task)]
    for task_id, lease in [item for item in items if isinstance(item, tuple)]:
        claimed.append(Task(pk=task_id, lease_until=parse_datetime(lease)))
    give_up(claimed)


def _run(item: str | tuple[str, str] | Task) -> None:
    if _pool is None:  # stopping: leave the task due rather than delay the shutdown
        _dropped([item])
        return
    if isinstance(item, Task):
        process_on_pool_thread(item)
    elif isinstance(item, tuple):
        process_on_pool_thread(*item)
    else:
        process_on_pool_thread(item)
