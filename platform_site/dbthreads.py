"""Small pools of database threads for the lean ASGI paths and the worker's sweeps.

Django's ORM is synchronous. Under ASGI, Django gives every request a fresh sync thread
(``ThreadSensitiveContext``), hence a fresh database connection. A :class:`ConnectionPool`
runs ORM work on a few dedicated threads instead, each keeping its own connection between
requests: no thread is created and no connection opened per request. Connections are
checked before each call (:func:`tidy_connections`). A pool sized ``0`` runs calls on
asgiref's one shared sync thread instead (what tests use, so the test's transaction is
visible).

Used by the A2A face (``A2A_FACE_DB_THREADS``, :mod:`a2a.face.db`) and the tasks API's
Bearer path (``TASKS_API_THREADS``, :mod:`a2a.api.asgi`) through :meth:`ConnectionPool.call`;
by the worker's sweeps and batch creations (``A2A_POLL_CONCURRENCY``,
``a2a.worker.sweep_threads``, ``a2a.tasks.batch_threads``) through
:meth:`ConnectionPool.lend`, which gives overlapping callers threads of their own.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from platform_site.metrics import cpu_stage

P = ParamSpec("P")
R = TypeVar("R")


def tidy_connections() -> None:
    """Drop this thread's connections that broke, or outlived a configured CONN_MAX_AGE.

    What ``close_old_connections`` does on Django's request signals, which the lean paths
    do not send: a pool thread lives across many requests.
    """
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        max_age = conn.settings_dict.get("CONN_MAX_AGE")
        expired = bool(max_age) and conn.close_at is not None and time.monotonic() >= conn.close_at
        if expired or (conn.errors_occurred and not conn.is_usable()):
            conn.close()


def drop_dead_connections() -> None:
    """Close this thread's connections that no longer work, before it writes again.

    A thread that waited minutes on an agent (a long call) kept a connection a database
    restart meanwhile killed, and nothing flagged it: the first write of the agent's
    answer failed, then the record of that failure on the same connection, and the answer
    was lost (the task sent again). One ``SELECT 1`` per connection, at the end of a call
    that long."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block and not conn.is_usable():
            conn.close()


# Overlapping callers' executors (see ConnectionPool.lend): at most SPARES_KEPT wait for
# the next overlap; one unused for SPARE_IDLE_SECONDS is closed with its connections.
SPARE_IDLE_SECONDS = 30.0
SPARES_KEPT = 4
_clock = time.monotonic


class ConnectionPool:
    """Threads that keep their database connections, sized by the setting ``size_setting``.

    The executor is created on first use (the setting is read then, so tests can change
    it before the first call and :meth:`close` after it). The CPU its calls use is counted
    under ``stage`` (default: the name) in ``a2a_cpu_seconds_total``.
    """

    def __init__(self, name: str, size_setting: str, stage: str = "") -> None:
        self.name = name
        self.size_setting = size_setting
        self.stage = stage or name
        self._cpu = cpu_stage(self.stage)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._lent = threading.Lock()
        self._spares: list[tuple[ThreadPoolExecutor, float]] = []  # idle, and since when

    def executor(self) -> ThreadPoolExecutor | None:
        """The running executor, or ``None`` when the setting asks for no threads."""
        size: int = getattr(settings, self.size_setting)
        if size <= 0:
            return None
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(size, thread_name_prefix=self.name)
            return self._executor

    @contextmanager
    def lend(self) -> Iterator[ThreadPoolExecutor]:
        """The kept threads (at least one), to one caller at a time: the threads of a
        sweep or a batch, whose connections then outlive it. A caller that finds them
        lent out gets threads of another executor, so concurrent callers never queue
        behind each other's work (a claimed task must not wait while its lease runs out).

        Those spare executors are kept too while overlaps go on (a burst of batch
        creations, sweeps that outlast their interval): closed after each call, they
        opened 7,996 PostgreSQL sessions in a run of 10,000 tasks (483 kept), at about
        11 ms of the server's CPU each. At most :data:`SPARES_KEPT` wait for the next
        overlap; one idle for :data:`SPARE_IDLE_SECONDS` is closed with its connections."""
        size = max(1, getattr(settings, self.size_setting))
        self._close(self._idle_spares())
        if self._lent.acquire(blocking=False):
            try:
                with self._lock:
                    if self._executor is None:
                        self._executor = ThreadPoolExecutor(size, thread_name_prefix=self.name)
                    kept = self._executor
                yield kept
            finally:
                self._lent.release()
            return
        spare = self._spare(size)
        try:
            yield spare
        finally:
            self._close(self._give_back(spare))

    def _spare(self, size: int) -> ThreadPoolExecutor:
        """The spare used last (so the others idle out), or a new one."""
        found, stale = None, []
        with self._lock:
            while self._spares and found is None:
                spare, _ = self._spares.pop()
                if spare._max_workers == size:
                    found = spare
                else:
                    stale.append(spare)  # sized before the setting changed (tests)
        self._close(stale)
        return found or ThreadPoolExecutor(size, thread_name_prefix=f"{self.name}-spare")

    def _give_back(self, spare: ThreadPoolExecutor) -> list[ThreadPoolExecutor]:
        """Keep ``spare`` for the next overlap; what is to be closed instead."""
        with self._lock:
            if len(self._spares) < SPARES_KEPT:
                self._spares.append((spare, _clock()))
                return []
        return [spare]

    def _idle_spares(self) -> list[ThreadPoolExecutor]:
        """Take out the spares idle for :data:`SPARE_IDLE_SECONDS`, to be closed."""
        horizon = _clock() - SPARE_IDLE_SECONDS
        with self._lock:
            idle = [spare for spare, since in self._spares if since <= horizon]
            self._spares = [(spare, since) for spare, since in self._spares if since > horizon]
        return idle

    @staticmethod
    def _close(executors: list[ThreadPoolExecutor]) -> None:
        for executor in executors:
            shutdown_closing_connections(executor)

    def call(self, func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        """``await pool.call(fn)(...)``: ``fn`` on a pool thread, connections tidied first."""

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with self._cpu:
                tidy_connections()
                return func(*args, **kwargs)

        executor = self.executor()
        if executor is None:
            return sync_to_async(run, thread_sensitive=True)

        # A plain hop to the pool, not asgiref's sync_to_async: nothing run here needs
        # its thread-sensitivity or its copying of context changes back to the caller,
        # and they cost 40-50 us of CPU on every call (measured: ~160 against ~120 us a
        # hop). The caller's context goes along (the log ids bound to a request).
        @functools.wraps(func)
        async def hop(*args: P.args, **kwargs: P.kwargs) -> R:
            job = functools.partial(contextvars.copy_context().run, run, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(executor, job)

        return hop

    def close(self) -> None:
        """Close every pool thread's connections and stop the pool (tests, shutdown).

        PostgreSQL will not drop a test database while these connections are open.
        """
        with self._lock:
            executor, self._executor = self._executor, None
            spares, self._spares = [spare for spare, _ in self._spares], []
        self._close(spares + ([executor] if executor is not None else []))


def shutdown_closing_connections(executor: ThreadPoolExecutor) -> None:
    """Have every thread of ``executor`` close its own database connections, then stop it.

    Threads keep their connections while the executor lives (one per thread, not one per
    job); a dead thread's connection must not be left for the garbage collector, and
    PostgreSQL will not drop a test database while one is open.
    """
    size = executor._max_workers
    barrier = threading.Barrier(size)

    def close() -> None:
        connections.close_all()
        barrier.wait(timeout=10)  # one call per thread: each closes its own connections

    wait([executor.submit(close) for _ in range(size)])
    executor.shutdown()
