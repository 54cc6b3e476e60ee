"""Fault suite, embedded mode: the platform process is SIGKILLed while tasks it created
wait for its threads, claimed at birth (their rows went in with a lease, and nothing but
that process's memory knew they were to be started). A new platform process sends them
once their leases run out: each completes once, and the agent sees each task under one
messageId."""

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

# One thread to start tasks: the second and later tasks wait for it, claimed at birth.
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
            for _ in range(4)
        ]
        deadline = time.monotonic() + 30
        while not peer.messages:  # its one thread is inside the first send
            assert time.monotonic() < deadline, "the first send never reached the agent"
            time.sleep(0.05)
        doomed.kill()
    waiting = list(Task.objects.filter(pk__in=ids, attempts=0))
    assert len(waiting) >= 2  # never sent, yet claimed: the kill found them queued
    assert all(t.lease_until is not None and t.state == TaskState.SUBMITTED for t in waiting)
    with embedded_platform(**ENV):
        tasks = [wait_for(Task.objects.get(pk=pk), timeout=60) for pk in ids]
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * len(tasks)
    for task in tasks:
        assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    per_message = Counter(m["messageId"] for m in peer.messages)
    assert len(per_message) == len(tasks)  # one messageId per task: one task at the agent
    for task in waiting:  # sent once, by the second process
        assert per_message[task.outbound_message["messageId"]] == 1
