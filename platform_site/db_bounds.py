"""Time limits on the database reads of ``/readyz`` and ``/metrics``.

A database that accepts connections but never answers (a stopped server, a black-holed
network path) made both wait forever: a load balancer's probe, or a Prometheus scrape,
then timed out with no word on what was wrong. ``DATABASE_CONNECT_TIMEOUT`` bounds the
connection; these bound the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TypeVar

from django.db import connection, connections, transaction

T = TypeVar("T")

PROBE_TIMEOUT = 2.0  # seconds per dependency


class ProbeTimeout(RuntimeError):
    """A probe did not answer in time; the message is safe to show to anyone."""


_given_up: dict[str, Future[object]] = {}  # per name, the last probe given up
_lock = threading.Lock()


def in_thread(name: str, probe: Callable[[], T], timeout: float = PROBE_TIMEOUT) -> T:
    """``probe()`` on a thread of its own (with its own database connection, closed after),
    given up after ``timeout`` seconds.

    A thread, because nothing else bounds a query a stopped server never answers: the
    server enforces ``statement_timeout``, and TCP keeps acknowledging. A probe given up
    goes on running until the database answers or the connection breaks; until then the
    next call of the same ``name`` fails at once instead of adding a thread per request.
    Probes that run at once (a load balancer's and an orchestrator's) each get theirs.
    """
    with _lock:
        stuck = _given_up.get(name)
        if stuck is not None and not stuck.done():
            raise ProbeTimeout(f"timeout: the check before has not answered after {timeout:g} s")
        _given_up.pop(name, None)
    future: Future[object] = Future()
    threading.Thread(target=_run, args=(probe, future), name=f"probe-{name}", daemon=True).start()
    try:
        return future.result(timeout)  # type: ignore[return-value]
    except TimeoutError:
        with _lock:
            _given_up[name] = future
        raise ProbeTimeout(f"timeout after {timeout:g} s") from None


def _run(probe: Callable[[], object], future: Future[object]) -> None:
    try:
        future.set_result(probe())
    except BaseException as exc:  # handed to the caller, which reports it
        future.set_exception(exc)
    finally:
        # Never kept: an idle connection per probe thread, and one left open would stop a
        # test run from dropping its database.
        connections.close_all()


@contextmanager
def statement_timeout(seconds: float = PROBE_TIMEOUT) -> Iterator[None]:
    """Inside: PostgreSQL cancels any statement that runs longer than ``seconds`` (a lock
    wait, a slow plan, an overloaded server). Set for this transaction only. SQLite's
    reads never wait (WAL), so nothing to bound there."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            # set_config, not SET: SET takes no bound parameter (server-side binding).
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true)", [str(int(seconds * 1000))]
            )
        yield
