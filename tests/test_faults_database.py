"""Fault suite, distributed mode: the database drops every connection a Celery worker
holds (what a PostgreSQL restart or failover does to it). Workers keep their connections
between tasks (``platform_site/celery.py``), so the next task finds a dead one: it must
be replaced, and the tasks that follow still complete, without restarting the worker."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest
from django.db import connection

from a2a import creation
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent
from tests.support.processes import FAST_ENGINE, beat_proc, started, worker_proc

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = FAST_ENGINE


def _drop_other_connections() -> int:
    """Terminate every other session on the test database (the worker's and beat's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_a_worker_replaces_connections_the_database_dropped(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    user = make_user()
    data = {"product": "lamp"}
    with ExitStack() as stack:
        _, worker = stack.enter_context(started(beat_proc(**ENV), worker_proc("kept", **ENV)))
        before = [creation.create_task(skill_id="ce-review", input=data, user=user)]
        before += [creation.create_task(skill_id="ce-review", input=data, user=user)]
        before = [wait_for(t, timeout=30) for t in before]
        assert _drop_other_connections() >= 1  # the worker's kept connections
        after = [
            creation.create_task(skill_id="ce-review", input=data, user=user) for _ in range(6)
        ]
        after = [wait_for(t, timeout=60) for t in after]
        assert worker.alive()
        log = worker.log_text()
    # The drop did reach the worker: a kept connection failed once, then was replaced.
    assert "terminating connection" in log or "server closed the connection" in log, log[-3000:]
    assert [t.state for t in before + after] == [TaskState.COMPLETED] * 8


def test_a_held_sends_answer_outlives_the_database_dropping_its_connection(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The database drops every connection while a worker's thread waits on a send the
    agent holds (a long call): when the answer comes, the thread's first write found its
    dead connection, then the record of that failure did too, and the answer was lost:
    the task was sent again and the agent ran it twice. Now a long call's end replaces
    such a connection first: one run at the agent, one completion."""
    from agent_profiles.models import AgentProfile
    from tests.support.sample_agent import run_sample_agent

    env = {**ENV, "A2A_HTTP_TIMEOUT": 1}
    with run_sample_agent(seconds=6.0, streaming=False) as sample:
        make_agent(id="sample", skills=[make_skill()], a2a_endpoint=sample.url)
        with ExitStack() as stack:
            _, worker = stack.enter_context(started(beat_proc(**env), worker_proc("held", **env)))
            task = creation.create_task(
                skill_id="ce-review", input={"product": "lamp"}, user=make_user()
            )
            holder = AgentProfile.objects.filter(pk="sample", early_return=False)
            wait_for(task, lambda t: holder.exists(), timeout=30)  # waited for, past 1 s
            assert _drop_other_connections() >= 1
            task = wait_for(task, timeout=60)
            assert worker.alive()
    assert (task.state, task.attempts) == (TaskState.COMPLETED, 1)
    assert len(sample.inputs) == 1
