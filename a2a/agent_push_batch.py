"""Pushes applied in batches: one transaction for the pushes that arrive together.

Agents push in bursts (the a2a-sdk sends four pushes per task, and many tasks end at
once); applied one transaction each, a burst of thousands queued behind the database's
write lock (SQLite) or its commits, and the platform noticed ends tens of seconds late
(``bench/long_tasks.py``). Here the webhook hands each parsed push to a per-event-loop
queue; up to ``AGENT_PUSH_THREADS`` drains take up to ``AGENT_PUSH_BATCH`` queued pushes
at a time and apply them on a database thread in one transaction, each push in its own
savepoint, so one push's refusal or error undoes only its own writes and reaches only its
own request. The rules are :func:`a2a.agent_push.apply`'s, push by push, in arrival order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections import deque
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from a2a import agent_push
from platform_site.dbthreads import ConnectionPool
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)

pool = ConnectionPool("agent-push", "AGENT_PUSH_THREADS")

Item = tuple[uuid.UUID, int, agent_push.Push]


@dataclass
class _Queue:
    """The pushes waiting on one event loop, and how many drains are running."""

    pending: deque[tuple[Item, asyncio.Future[agent_push.Applied]]] = field(default_factory=deque)
    running: int = 0  # drains running (counted down in the drain, with no await between
    # its last look at the queue and the count: a push queued later starts a new drain)
    drains: set[asyncio.Task[None]] = field(default_factory=set)  # held: tasks are weak


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()


async def apply(task_id: uuid.UUID, attempt: int, push: agent_push.Push) -> agent_push.Applied:
    """Apply one push with the others that arrive meanwhile; raises what
    :func:`a2a.agent_push.apply` raises for it."""
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = _Queue()
    future: asyncio.Future[agent_push.Applied] = loop.create_future()
    queue.pending.append(((task_id, attempt, push), future))
    if queue.running < max(1, settings.AGENT_PUSH_THREADS):
        queue.running += 1
        drain = loop.create_task(_drain(queue))
        queue.drains.add(drain)
        drain.add_done_callback(queue.drains.discard)
    return await future


async def _drain(queue: _Queue) -> None:
    try:
        while queue.pending:
            size = min(len(queue.pending), max(1, settings.AGENT_PUSH_BATCH))
            batch = [queue.pending.popleft() for _ in range(size)]
            try:
                results = await pool.call(apply_batch)([item for item, _ in batch])
            except Exception as exc:  # the batch's commit failed: every push gets the error
                log.exception("could not apply a batch of %d pushes", len(batch))
                results = [exc] * len(batch)
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # the agent went away meanwhile
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
    finally:
        queue.running -= 1


def apply_batch(items: list[Item]) -> list[agent_push.Applied | Exception]:
    """Apply pushes in one transaction, each in a savepoint; its result or its error."""
    results: list[agent_push.Applied | Exception] = []
    with transaction.atomic():
        for task_id, attempt, push in items:
            try:
                with transaction.atomic():
                    results.append(agent_push.apply(task_id, attempt, push))
            except PlatformError as exc:
                results.append(exc)
            except Exception as exc:
                log.exception("push webhook: could not apply a push to task %s", task_id)
                results.append(exc)
    return results
