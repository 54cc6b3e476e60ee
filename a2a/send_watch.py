"""Sends to an agent not yet known to hold them: waited for past ``A2A_HTTP_TIMEOUT``
rather than sent again.

A send asks the agent to return at once (``returnImmediately``). An agent that holds it
anyway until its task ends or asks (:mod:`a2a.holding_agents`) is found out when a send
gets no answer in time. Until this module, that send was then given up and sent again
later: the agent, which had the message, ran the task twice (a2a-sdk's samples, LangGraph).

So a send to an agent of which neither is known yet (it was never seen to answer with its
task in flight, nor marked a holder) made on a thread of :mod:`a2a.local_dispatch` (where
new tasks and replies start, in both modes) waits for its answer as long as the task may
take. It is watched: once it has waited ``A2A_HTTP_TIMEOUT``, it becomes a long call
where it runs (:func:`a2a.long_calls.became_long`), the task's claim is kept to cover
the wait, the thread steps aside from the pool (:mod:`platform_site.elastic_pool`), where
a new thread takes its place so that the threads that start tasks stay free, and the
agent is marked a holder. A send that answers in time costs its watch, about 8 us of CPU
(measured against a transport that returns at once; a worker's instant task, 1.4 ms).

The sweep hands such sends to those threads, with their claims
(:func:`a2a.worker.sweep`), and so does a Celery worker for a hint that waited (a retry:
``a2a.process``). Where no such thread is free at once, or no room is left for one more
long call to the agent, a send waits ``A2A_HTTP_TIMEOUT`` as before.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connections

from a2a import holding_agents, lease_keeper, long_calls
from a2a.follow_policy import long_call_seconds
from a2a.models import Task
from a2a.transports.base import AgentReply, AgentTransport
from platform_site import elastic_pool
from platform_site.dbthreads import drop_dead_connections
from platform_site.elastic_pool import ElasticPool

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Watch:
    """One send being watched: when it is due to become a long call, and whether it did."""

    task: Task
    pool: ElasticPool
    thread: threading.Thread
    seconds: float  # how long the send may wait for its answer
    due: float  # time.monotonic() at which it becomes a long call
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    long: bool = False


_cond = threading.Condition()
_watches: set[_Watch] = set()
_watchdog: threading.Thread | None = None


def may_hold(task: Task) -> bool:
    """Whether the task's agent is not yet known to hold its sends, nor to return them
    early: a send to it is watched where it can be (:func:`send`)."""
    return not holding_agents.holds(task) and not task.agent.early_return_seen


def send(
    task: Task, transport: AgentTransport, message: dict[str, Any], push: dict[str, Any] | None
) -> AgentReply:
    """The send of a claimed task to an agent whose holding is not known yet (see the
    module docstring); a plain send (``A2A_HTTP_TIMEOUT``) where it cannot be watched."""
    pool = elastic_pool.current()
    if pool is None or not long_calls.taken_here() or not long_calls.room_for(task.agent_id):
        return transport.send(message, push=push)
    seconds = long_call_seconds(task)
    if seconds <= settings.A2A_HTTP_TIMEOUT:  # its deadline is nearer: nothing to wait for
        return transport.send(message, push=push)
    watch = _Watch(
        task=task,
        pool=pool,
        thread=threading.current_thread(),
        seconds=seconds,
        due=time.monotonic() + settings.A2A_HTTP_TIMEOUT,
    )
    _add(watch)
    try:
        return transport.send(message, push=push, timeout=seconds)
    finally:
        _end(watch)
        if watch.long:
            drop_dead_connections()  # it waited long: the database may have restarted


def _add(watch: _Watch) -> None:
    global _watchdog
    with _cond:
        _watches.add(watch)
        if _watchdog is None or not _watchdog.is_alive():  # not yet, or not in this fork
            _watchdog = threading.Thread(target=_watch_loop, name="a2a-send-watch", daemon=True)
            _watchdog.start()
        elif len(_watches) == 1:
            _cond.notify()  # it waits for a first watch


def _end(watch: _Watch) -> None:
    """The send ended (answered or failed): after a long call's own bookkeeping, if it
    became one meanwhile (waiting for that to be written first)."""
    with _cond:
        _watches.discard(watch)
    with watch.lock:
        watch.done = True
        if watch.long:
            lease_keeper.let_go(watch.task)
            long_calls.ended(watch.task.agent_id or "")


def _watch_loop() -> None:
    """Turn each send still unanswered at its due time into a long call (on a thread of
    its own for the database writes, so that this loop never waits on them)."""
    while True:
        with _cond:
            while not _watches:
                _cond.wait()
            now = time.monotonic()
            late = [watch for watch in _watches if watch.due <= now]
            _watches.difference_update(late)
            if not late:
                _cond.wait(min(watch.due for watch in _watches) - now)
                continue
        for watch in late:
            threading.Thread(
                target=_become_long, args=(watch,), name="a2a-send-watch-late", daemon=True
            ).start()


def _become_long(watch: _Watch) -> None:
    """The send is still waiting: it becomes a long call where it runs (see the module
    docstring)."""
    task = watch.task
    try:
        with watch.lock:
            if watch.done:
                return
            watch.long = True
            long_calls.became_long(task.agent_id or "")
            # The claim first: another worker taking the task over would send it again.
            lease_keeper.keep(task)
            watch.pool.step_aside(watch.thread)
            holding_agents.mark_holder(  # last: what the agent's next sends go by
                task,
                f"no answer within {settings.A2A_HTTP_TIMEOUT:g} s (A2A_HTTP_TIMEOUT); "
                "it was waited for, not sent again",
            )
        log.info(
            "task %s: agent %s holds its send; waiting for the answer up to %.0f s",
            task.pk,
            task.agent_id,
            watch.seconds,
        )
    except Exception:  # the send goes on either way; its claim may run out (a re-send)
        log.exception("task %s: could not turn its send into a long call", task.pk)
    finally:
        connections.close_all()  # this thread's own, which ends here
