"""Running ORM work from the face's async views.

Django's ORM is synchronous. ``db_call`` runs a function in a worker thread and releases
the connection state Django would otherwise only tidy at the end of a sync request.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

P = ParamSpec("P")
R = TypeVar("R")


def db_call(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``await db_call(fn)(...)``: ``fn`` in Django's thread for sync code, with stale
    connections closed first (long-lived ASGI processes never run request_finished there)."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not connection.in_atomic_block:  # tests run inside one; leave it alone
            close_old_connections()
        return func(*args, **kwargs)

    return sync_to_async(run, thread_sensitive=True)
