"""A graceful stop gives up the claims of the tasks it will not start.

Tasks claimed for a process's threads (at birth, by a worker's hint batch) wait in its
pool's queue while the threads are busy. A graceful stop (Ctrl-C on ``make run``, a
rolling restart's SIGTERM to a worker) emptied the queue and kept the claims: after every
clean restart each such task waited out ``A2A_LEASE_SECONDS`` (30 s by default) before
the next start, or another worker, could send it — a delay only a killed process should
cause. The stopping pool now hands what it drops back (:func:`a2a.local_dispatch._dropped`).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from a2a import creation
from a2a.models import Task
from a2a.states import TaskState
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, celery_worker, embedded_platform

pytestmark = pytest.mark.slow

SLOW_SEND = {"product": "lamp", "behaviour": "slowsend", "seconds": 2}


def wait_for_first_send(peer: TestAgent, log: Any = None) -> None:
    """Until the agent holds the first send: the process's one thread is busy."""
    deadline = time.monotonic() + 30
    while not peer.messages:
        assert time.monotonic() < deadline, log() if log else "the first send never came"
        time.sleep(0.05)


def assert_unclaimed(tasks: list[Task]) -> None:
    """``tasks`` not sent, and claimed by nobody."""
    now = timezone.now()
    for task in tasks:
        task.refresh_from_db()
        assert (task.state, task.attempts) == (TaskState.SUBMITTED, 0)
        left = (task.lease_until - now).total_seconds() if task.lease_until else 0.0
        assert left <= 0, f"claim left {left:.0f} s after a graceful stop"


def test_ctrl_c_gives_up_the_claims_of_tasks_queued_for_its_threads(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    if settings.DISTRIBUTED:
        pytest.skip("the embedded mode (runplatform runs daphne alone in the distributed one)")
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    auth = {"Authorization": f"Bearer {make_user().raw_token}"}
    body = {"skillId": "ce-review", "input": SLOW_SEND}
    env = {**FAST_ENGINE, "A2A_EMBEDDED_THREADS": 1, "A2A_LEASE_SECONDS": 60}
    with embedded_platform(**env) as proc:
        ids = [
            httpx.post(f"{proc.url}/api/tasks", json=body, headers=auth).json()["id"]
            for _ in range(2)
        ]
        wait_for_first_send(peer)
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.popen.wait(timeout=60) == 0
    assert_unclaimed([Task.objects.get(pk=ids[1])])


@pytest.mark.distributed
def test_sigterm_gives_up_the_claims_of_hinted_tasks_queued_for_its_threads(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    user = make_user()
    env = {**FAST_ENGINE, "A2A_HINT_THREADS": 1, "A2A_LEASE_SECONDS": 60, "A2A_STOP_WAIT": 10}
    with celery_worker("hinted", **env) as worker:
        tasks = [
            creation.create_task(skill_id="ce-review", input=SLOW_SEND, user=user) for _ in range(2)
        ]
        wait_for_first_send(peer, worker.log_text)
        assert worker.stop(timeout=30) == 0  # SIGTERM: a warm shutdown
    queued = [task for task in tasks if Task.objects.get(pk=task.pk).attempts == 0]
    assert queued
    assert_unclaimed(queued)
