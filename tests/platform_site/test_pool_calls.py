"""``ConnectionPool.call``: what the lean ASGI paths rely on when they hop to a pool thread."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from platform_site import logs
from platform_site.dbthreads import ConnectionPool


@pytest.fixture
def pool(settings: Any) -> Iterator[ConnectionPool]:
    settings.TEST_CALL_THREADS = 2
    pool = ConnectionPool("test-call", "TEST_CALL_THREADS")
    yield pool
    pool.close()


def where() -> tuple[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return threading.current_thread().name, id(connection.connection)


@pytest.mark.django_db(transaction=True)
def test_calls_run_on_the_pools_threads_which_keep_their_connections(
    pool: ConnectionPool,
) -> None:
    async def calls() -> list[tuple[str, int]]:
        return [await pool.call(where)() for _ in range(6)]

    seen = asyncio.run(calls())
    assert all(name.startswith("test-call") for name, _ in seen)
    assert threading.current_thread().name not in {name for name, _ in seen}
    # one connection per thread, reused from call to call (at most two threads)
    assert len({conn for _, conn in seen}) <= 2


def test_arguments_and_results_pass_and_errors_reach_the_caller(pool: ConnectionPool) -> None:
    def add(a: int, b: int = 0) -> int:
        if a < 0:
            raise ValueError("negative")
        return a + b

    assert asyncio.run(pool.call(add)(2, b=3)) == 5
    with pytest.raises(ValueError, match="negative"):
        asyncio.run(pool.call(add)(-1))


def test_the_callers_log_ids_go_along(pool: ConnectionPool, caplog: Any) -> None:
    """A line logged on the pool thread names the task the request was about."""

    def log_something() -> None:
        logging.getLogger("test.pool").warning("inside")

    async def request() -> None:
        with logs.bound(task_id="t-1", agent_id="a-1"):
            await pool.call(log_something)()

    filt = logs.BoundIds()
    caplog.handler.addFilter(filt)
    try:
        with caplog.at_level(logging.WARNING, logger="test.pool"):
            asyncio.run(request())
    finally:
        caplog.handler.removeFilter(filt)
    (record,) = [r for r in caplog.records if r.getMessage() == "inside"]
    assert (record.task_id, record.agent_id) == ("t-1", "a-1")
