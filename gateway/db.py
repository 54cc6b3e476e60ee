"""Running the gateway's ORM work off the event loop.

``await db(fn)(...)`` runs ``fn`` on the gateway's pool of database threads
(``GATEWAY_DB_THREADS``, :mod:`platform_site.dbthreads`): each keeps its connection, so an
ack, a claim or an update does not open a new one (Channels' ``database_sync_to_async``
closes it after every call when ``CONN_MAX_AGE`` is 0, as on SQLite), and one slow query
does not hold up every socket of the process. Frames of one connection stay in order: the
consumer awaits each call.

``await db_fresh(fn)(...)`` does the same for work that may run twice (an ack, an update:
both idempotent), once more on a new connection when the kept one turned out dead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, connection

from platform_site.dbthreads import ConnectionPool

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger(__name__)

pool = ConnectionPool("gateway-db", "GATEWAY_DB_THREADS", stage="gateway")
db = pool.call
close_pool = pool.close


def on_a_live_connection(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, run again once on a new connection if it failed on a dead one.

    A kept connection outlives a database restart unnoticed: the pool checks only those
    that failed before (``tidy_connections``), so the first call after the restart failed
    on it. For a ``task.update`` that was an agent's COMPLETED refused with
    ``internal_error`` though the database was back; an agent that did not send it again
    left its (acknowledged) task SUBMITTED for good. A database that answers (a lock
    timeout, a constraint) is not retried: the same call would fail the same way, after
    as long a wait. Nor is a call inside a transaction (tests): its work would be lost.
    """

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or (
                connection.connection is not None and connection.is_usable()
            ):
                raise
            log.warning("gateway: database connection lost; %s again on a new one", func.__name__)
            connection.close()
            return func(*args, **kwargs)

    return run


def db_fresh(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``db(func)``, run again on a new connection if the kept one was dead (see
    :func:`on_a_live_connection`): only for work that may run twice."""
    return db(on_a_live_connection(func))
