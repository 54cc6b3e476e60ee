"""A pool of threads that keep their database connections, where a job that turns out to
last can step aside.

:mod:`a2a.local_dispatch` starts tasks on such a pool. A job found to last long (a send an
agent holds past ``A2A_HTTP_TIMEOUT``: :mod:`a2a.send_watch`) steps aside: a new thread
takes its place at once, and the old one ends with its job. So the pool always has its
width of threads free to take jobs, whatever the jobs that stepped aside still do; how
many may step aside is the caller's to bound (:mod:`a2a.long_calls`).

Its threads are daemons: a stopping process waits for the jobs of the threads still in
the pool (:meth:`ElasticPool.stop`), never for those that stepped aside, whose tasks'
claims run out if the process exits first (delayed, never lost).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

__all__ = ["ElasticPool", "current"]

log = logging.getLogger(__name__)

_STOP = object()
_here = threading.local()


def current() -> ElasticPool | None:
    """The pool this thread belongs to (None off a pool's threads, and once it stepped
    aside)."""
    pool: ElasticPool | None = getattr(_here, "pool", None)
    if pool is None or threading.current_thread() not in pool._threads:
        return None
    return pool


class ElasticPool:
    """``width`` threads running ``run(item)`` for each submitted item, in order."""

    def __init__(
        self,
        width: int,
        name: str,
        run: Callable[[Any], None],
        on_drop: Callable[[list[Any]], None] | None = None,
    ) -> None:
        self._run = run
        self._on_drop = on_drop
        self._name = name
        self._numbers = itertools.count(1)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()  # in the pool, taking jobs
        self._aside: set[threading.Thread] = set()  # stepped aside, still on their job
        self._pending = 0  # submitted, and not done nor stepped aside
        self._stopping = False
        with self._lock:
            for _ in range(max(1, width)):
                self._spawn()

    def submit(self, item: Any) -> None:
        """Queue ``item`` for the next free thread; RuntimeError once the pool stops."""
        with self._lock:
            if self._stopping:
                raise RuntimeError("the pool is stopped")
            self._pending += 1
            # Under the lock: put after a stop's drain, it was neither run nor dropped.
            self._jobs.put(item)

    def pending(self) -> int:
        """Items submitted and not yet done (queued or running), those whose thread
        stepped aside left out: they no longer hold a place in the pool."""
        return self._pending

    def has_room(self, items: int = 1, rounds: int = 1) -> bool:
        """Whether ``items`` submitted now would start within ``rounds`` of jobs: at once
        by default (fewer items pending than threads in the pool)."""
        with self._lock:
            return self._pending + items <= rounds * len(self._threads)

    def step_aside(self, thread: threading.Thread) -> bool:
        """Take ``thread`` out of the pool with the job it runs (any thread may ask): a new
        thread takes its place (none once the pool stops), and ``thread`` ends with its
        job. False when ``thread`` is not one of the pool's threads."""
        with self._lock:
            if thread not in self._threads:
                return False
            self._threads.discard(thread)
            self._aside.add(thread)
            self._pending -= 1
            if not self._stopping:
                self._spawn()
        return True

    def stop(self) -> None:
        """Take no more items and wait for the threads in the pool to end their jobs (each
        closes its database connections); items still queued are not run, but handed to
        ``on_drop`` (a claim taken for one is given up there: kept, the next start or
        another worker waited for its lease to run out). Threads that stepped aside are
        not waited for."""
        with self._lock:
            self._stopping = True
            threads = list(self._threads)
        dropped: list[Any] = []
        while True:  # items nobody will run: their rows stay due
            try:
                dropped.append(self._jobs.get_nowait())
            except queue.Empty:
                break
            with self._lock:
                self._pending -= 1
        if dropped and self._on_drop is not None:
            try:
                self._on_drop(dropped)
            except Exception:  # the claims run out instead: delayed, not lost
                log.warning("%s: could not hand over %d dropped items", self._name, len(dropped))
        for _ in threads:
            self._jobs.put(_STOP)
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
                with self._lock:
                    if thread in self._aside:
                        break

    def _spawn(self) -> None:
        """Start one more thread in the pool (under the lock)."""
        thread = threading.Thread(
            target=self._loop, name=f"{self._name}-{next(self._numbers)}", daemon=True
        )
        self._threads.add(thread)
        thread.start()

    def _loop(self) -> None:
        me = threading.current_thread()
        _here.pool = self
        try:
            while (item := self._jobs.get()) is not _STOP:
                try:
                    self._run(item)
                except Exception:  # the job's own to record; the thread goes on
                    log.exception("%s: a job failed", self._name)
                finally:
                    with self._lock:
                        aside = me in self._aside
                        if not aside:
                            self._pending -= 1
                if aside:
                    break
        finally:
            _here.pool = None
            connections.close_all()  # this thread's own, which ends here
            with self._lock:
                self._threads.discard(me)
                self._aside.discard(me)
