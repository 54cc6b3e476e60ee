"""Fault suite, embedded mode: the platform process is SIGKILLed while tasks it created
wait for its threads, one claimed at birth (its row went in with a lease, and nothing but
that process's memory knew it was to be started) and one not. A new platform process
sends them (the first once its lease runs out): each completes once, and the agent sees
each task under one messageId."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest

from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, embedded_platform

pytestmark = pytest.mark.slow

# One thread to start tasks: the second task waits for it claimed at birth (it would start
# within two rounds of jobs), the third unclaimed (behind a longer queue).
ENV = {**FAST_ENGINE, "A2A_EMBEDDED_THREADS": 1}


def test_a_platform_killed_with_tasks_claimed_at_birth_only_delays_them(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    auth = {"Authorization": f"Bearer {make_user().raw_token}"}
    body = {"skillId": "ce-review", "input": {"product": "lamp", "behaviour": "slowsend"}}
    with embedded_platform(**ENV) as doomed:
        ids = [
            httpx.post(f"{doomed.url}/api/tasks", json=body, headers=auth).json()["id"]  # type: ignore[attr-defined]
            for _ in range(3)
        ]
        deadline = time.monotonic() + 30
        while not peer.messages:  # its one thread is inside the first send
            assert time.monotonic() < deadline, "the first send never reached the agent"
            time.sleep(0.05)
        doomed.kill()
    waiting = sorted(
        Task.objects.filter(pk__in=ids, attempts=0), key=lambda t: ids.index(str(t.pk))
    )
    assert [str(t.pk) for t in waiting] == ids[1:]  # never sent: the kill found them queued
    assert [t.state for t in waiting] == [TaskState.SUBMITTED] * 2
    assert waiting[0].lease_until is not None  # claimed at birth
    assert waiting[1].lease_until is None  # behind a longer queue: left to the sweep
    with embedded_platform(**ENV):
        tasks = [wait_for(Task.objects.get(pk=pk), timeout=60) for pk in ids]
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * len(tasks)
    for task in tasks:
        assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    per_message = Counter(m["messageId"] for m in peer.messages)
    assert len(per_message) == len(tasks)  # one messageId per task: one task at the agent
    for task in waiting:  # sent once, by the second process
        assert per_message[task.outbound_message["messageId"]] == 1
