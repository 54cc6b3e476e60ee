"""Running ORM work from the face's async views.

Django's ORM is synchronous. ``db_call(fn)`` runs ``fn`` on a small pool of dedicated
threads (``A2A_FACE_DB_THREADS``), each keeping its own database connection between
requests: no thread is created and no connection opened per request. Connections are
checked before each call (a broken one is dropped, and one past ``CONN_MAX_AGE`` when that
is set). With ``A2A_FACE_DB_THREADS=0`` calls run in Django's thread for sync code instead
(what tests use, so the test's transaction is visible).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(
            max_workers=settings.A2A_FACE_DB_THREADS, thread_name_prefix="a2a-face-db"
        )
    return _executor


def close_pool() -> None:
    """Close every pool thread's connections and stop the pool (tests, shutdown)."""
    global _executor
    if _executor is None:
        return
    size = _executor._max_workers
    barrier = threading.Barrier(size)

    def close() -> None:
        connections.close_all()
        barrier.wait(timeout=10)  # one task per thread: every thread closes its own

    wait([_executor.submit(close) for _ in range(size)])
    _executor.shutdown()
    _executor = None


def tidy_connections() -> None:
    """Drop this thread's connections that broke, or outlived a configured CONN_MAX_AGE."""
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block or conn.connection is None:
            continue
        if (conn.errors_occurred and not conn.is_usable()) or (
            conn.settings_dict.get("CONN_MAX_AGE")
            and conn.close_at is not None
            and time.monotonic() >= conn.close_at
        ):
            conn.close()


def db_call(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``await db_call(fn)(...)``: ``fn`` on a database thread, connections tidied first."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        tidy_connections()
        return func(*args, **kwargs)

    if settings.A2A_FACE_DB_THREADS <= 0:
        return sync_to_async(run, thread_sensitive=True)
    return sync_to_async(run, thread_sensitive=False, executor=_pool())
