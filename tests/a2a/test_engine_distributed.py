"""The batched poll engine and the listings across worker processes (PostgreSQL, Redis,
Celery): two workers share the polling (or the agent's listings) without ever acting on
one task twice, and one SIGKILLed in the middle of its batches (or of a listing) only
delays its tasks, which each complete exactly once."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import pytest

from a2a import batch
from a2a.models import Task, TaskEvent
from a2a.states import TERMINAL_STATES, TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, beat_proc, started, worker_proc

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

N = 24
ENV = {
    **FAST_ENGINE,
    "A2A_POLL_INTERVAL_MAX": 0.4,
    "A2A_POLL_ENGINE_BATCH": 6,  # several batches per sweep, so a kill lands inside one
    "A2A_LEASE_SECONDS": 10,  # a loaded machine must not let a live claim run out
    "A2A_HTTP_TIMEOUT": 3,
}


def followed(peer: TestAgent, follow: str) -> int:
    """The agent requests that followed the tasks so far: polls, or listings."""
    if follow == "list":
        return peer.counts["/tasks"]
    return sum(n for p, n in peer.counts.items() if "/tasks/" in p)


@pytest.mark.parametrize("follow", ["poll", "list"])
def test_a_worker_killed_mid_batch_only_delays_and_nothing_runs_twice(
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peer: TestAgent,
    follow: str,
) -> None:
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    user = make_user()
    env = {**ENV, "A2A_LIST_INTERVAL": 0.3 if follow == "list" else 0}
    with ExitStack() as stack:
        procs = (beat_proc(**env), worker_proc("first", **env), worker_proc("second", **env))
        _, *workers = stack.enter_context(started(*procs))
        requests = [
            batch.TaskRequest("ce-review", {"product": f"p{i}", "behaviour": "slow", "seconds": 3})
            for i in range(N)
        ]
        tasks = [o.task for o in batch.create_tasks(requests, user=user)]
        # Every task was sent and the workers are polling (or listing): kill one while its
        # batches (or a listing) are in flight.
        deadline = time.monotonic() + 30
        enough = N if follow == "poll" else 2
        while time.monotonic() < deadline and (
            Task.objects.filter(remote_task_id="").exists() or followed(peer, follow) < enough
        ):
            time.sleep(0.05)
        workers[0].kill()
        # The kill lands while tasks are in flight: sent, not ended (SUBMITTED until a
        # listing reports the agent's WORKING, which a fast run's first listings can miss).
        assert Task.objects.exclude(state__in=TERMINAL_STATES).exists()
        tasks = [wait_for(t, timeout=60) for t in tasks if t is not None]
        assert workers[1].alive()
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * N
    assert {t.metadata["followedBy"] for t in tasks} == {follow}
    # Every task was sent (the kill came after the sends), none of them again.
    assert len({m["messageId"] for m in peer.messages}) == N
    assert peer.sends == N
    for task in tasks:
        events = list(TaskEvent.objects.filter(task=task).values_list("to_state", flat=True))
        assert events.count(TaskState.WORKING) <= 1, events
        assert events.count(TaskState.COMPLETED) == 1, events
