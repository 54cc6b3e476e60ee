"""Small pools of database threads for the lean ASGI paths.

Django's ORM is synchronous. Under ASGI, Django gives every request a fresh sync thread
(``ThreadSensitiveContext``), hence a fresh database connection. A :class:`ConnectionPool`
runs ORM work on a few dedicated threads instead, each keeping its own connection between
requests: no thread is created and no connection opened per request. Connections are
checked before each call (:func:`tidy_connections`). A pool sized ``0`` runs calls on
asgiref's one shared sync thread instead (what tests use, so the test's transaction is
visible).

Used by the A2A face (``A2A_FACE_DB_THREADS``, :mod:`a2a.face.db`) and the tasks API's
Bearer path (``TASKS_API_THREADS``, :mod:`a2a.api.asgi`).
"""

from __future__ import annotations

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
        lent out gets threads of its own for the call, closed after it, so concurrent
        callers never queue behind each other's work (a claimed task must not wait while
        its lease runs out)."""
        size = max(1, getattr(settings, self.size_setting))
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
        spare = ThreadPoolExecutor(size, thread_name_prefix=f"{self.name}-spare")
        try:
            yield spare
        finally:
            shutdown_closing_connections(spare)

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
        return sync_to_async(run, thread_sensitive=False, executor=executor)

    def close(self) -> None:
        """Close every pool thread's connections and stop the pool (tests, shutdown).

        PostgreSQL will not drop a test database while these connections are open.
        """
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            shutdown_closing_connections(executor)


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
