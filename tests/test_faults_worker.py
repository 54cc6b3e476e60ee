"""Fault suite, distributed mode: one of two Celery workers is SIGKILLed while the agent is
in the middle of answering its sends (a slow agent). Every task completes once, and the
agent sees each task under one messageId: a re-sent message is the same attempt, so an
agent that deduplicates on messageId (as DESIGN.md asks) holds exactly one task per
platform task."""

from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack
from typing import Any

import pytest

from a2a import creation
from a2a.models import TaskEvent
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, beat_proc, started, worker_proc

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = FAST_ENGINE


def test_a_worker_killed_mid_send_leaves_one_task_per_message_at_the_agent(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    user = make_user()
    with ExitStack() as stack:
        _, doomed = stack.enter_context(started(beat_proc(**ENV), worker_proc("doomed", **ENV)))
        data = {"product": "lamp", "behaviour": "slowsend", "seconds": 2}
        tasks = [
            creation.create_task(skill_id="ce-review", input=data, user=user) for _ in range(6)
        ]
        deadline = time.monotonic() + 30
        while len(peer.messages) < 3:  # the only worker is inside several sends
            assert time.monotonic() < deadline, "the sends never reached the agent"
            time.sleep(0.05)
        survivor = worker_proc("survivor", **ENV)
        stack.callback(survivor.close)
        doomed.kill()
        survivor.wait_log(r"ready\.", timeout=60)
        tasks = [wait_for(t, timeout=60) for t in tasks]
        assert survivor.alive()
    assert [t.state for t in tasks] == [TaskState.COMPLETED] * len(tasks)
    for task in tasks:
        assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    per_message = Counter(m["messageId"] for m in peer.messages)
    assert len(per_message) == len(tasks)  # one messageId per task: one task at the agent
    assert sum(per_message.values()) > len(tasks)  # the kill did land mid-send: re-sent
