"""Fault suite, distributed mode: Redis killed for ~10 s, several times, with sends in
flight on every worker. Every worker (and beat, and daphne) is still alive afterwards,
every task ends, and no task is sent to its agent twice.

Before platform_site/kombu_fix.py, a worker holding unacknowledged messages when Redis
dropped exited with ``Unrecoverable error: AttributeError("'NoneType' object has no
attribute 'hostname'")`` (kombu issues #970 and #582).
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack
from typing import Any

import pytest

from a2a import creation
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import (
    FAST_ENGINE,
    beat_proc,
    daphne_proc,
    redis_server,
    started,
    worker_proc,
)

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

OUTAGES = 3
OUTAGE_SECONDS = 10
ENV = {**FAST_ENGINE, "A2A_LEASE_SECONDS": 5}


@pytest.fixture
def user(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: Any
) -> Any:
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    return make_user()


def start(user: Any, n: int) -> list[Task]:
    # slowsend: the agent holds each send for a while, so workers are inside sends (holding
    # unacknowledged messages) when Redis goes down.
    data = {"product": "lamp", "behaviour": "slowsend", "seconds": 1.5}
    return [creation.create_task(skill_id="ce-review", input=data, user=user) for _ in range(n)]


def test_workers_survive_repeated_redis_outages_and_no_task_is_sent_twice(
    user: Any, peer: TestAgent
) -> None:
    tasks: list[Task] = []
    with ExitStack() as stack:
        redis = stack.enter_context(redis_server())
        env = {**ENV, "REDIS_URL": redis.url}
        procs = [worker_proc("fault0", **env), worker_proc("fault1", **env)]
        procs += [beat_proc(**env), daphne_proc(**env)]
        *workers, beat, daphne = stack.enter_context(started(*procs))
        for _ in range(OUTAGES):
            batch = start(user, 6)
            tasks += batch
            sent_before = peer.sends
            deadline = time.monotonic() + 20
            while peer.sends < sent_before + 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # sends are in flight on the workers
            redis.kill()
            time.sleep(OUTAGE_SECONDS)
            redis.start()
            time.sleep(2)
        tasks = [wait_for(t, timeout=90) for t in tasks]
        for proc in [*workers, beat, daphne]:
            assert proc.alive(), proc.log_text()[-3000:]
        logs = "".join(w.log_text() for w in workers)
    assert "Unrecoverable error" not in logs
    assert "Connection to broker lost" in logs  # the outages did reach the workers
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * len(tasks)
    sends = Counter(m["messageId"] for m in peer.messages)
    assert len(sends) == len(tasks)
    assert max(sends.values()) == 1, sends
