"""Requests on Django's full stack give their database connections back when they end:
each runs on a thread of its own, and with CONN_MAX_AGE the connection outlived the
request until the garbage collector ran (285 held after a burst of 600, and PostgreSQL
refused every other client). A real daphne on PostgreSQL. Slow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from tests.support.processes import Proc, daphne_process

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

BURST = 120


@pytest.fixture
def daphne(transactional_db: None) -> Iterator[Proc]:
    with daphne_process(LOG_LEVEL="WARNING") as proc:
        yield proc


def _held_by_others() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_a_burst_on_the_full_stack_leaves_no_connections_held(daphne: Proc) -> None:
    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=BURST)
        async with httpx.AsyncClient(base_url=daphne.url, limits=limits, timeout=60) as client:
            answers = await asyncio.gather(*(client.get("/api/a2a/skills") for _ in range(BURST)))
        return [answer.status_code for answer in answers]

    before = _held_by_others()
    statuses = asyncio.run(burst())
    assert statuses.count(200) == BURST, sorted(set(statuses))
    deadline = time.monotonic() + 5
    while _held_by_others() > before + 10:  # the lean paths' few pooled ones at most
        assert time.monotonic() < deadline, (before, _held_by_others())
        time.sleep(0.2)
