"""The sweep's and batches' threads keep their database connections from one call to the
next (a connection opened per sweep started a PostgreSQL backend each time), and callers
that overlap never share them: the second gets threads of its own, kept for the next
overlap while overlaps go on, closed once idle."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from a2a import creation, worker
from a2a.models import Task
from a2a.tasks import batch_threads, process_many
from platform_site import dbthreads
from platform_site.dbthreads import ConnectionPool

pytestmark = pytest.mark.django_db(transaction=True)


def due_task(skill: Any, user: Any) -> Task:
    """A new task whose hint was lost: the sweep takes it (its send fails at once, the
    agent's loopback address being refused or its port closed: a retry is scheduled)."""
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=user)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now() - timedelta(seconds=60))
    return task


def thread_connection(pool: ConnectionPool) -> tuple[int, bool]:
    """On the pool's (one) kept thread: which thread, and whether it has a connection."""
    executor = pool.executor()
    assert executor is not None

    def probe() -> tuple[int, bool]:
        return threading.get_ident(), connections["default"].connection is not None

    return executor.submit(probe).result(timeout=10)


@pytest.fixture
def one_thread(settings: Any, make_skill: Any, make_agent: Any, make_user: Any) -> Any:
    """One thread per pool; a skill offered by an agent, and a user: what ``due_task``
    needs."""
    settings.A2A_POLL_CONCURRENCY = 1
    skill, user = make_skill(), make_user()
    make_agent(skills=[skill])
    return skill, user


def test_the_sweeps_thread_keeps_its_connection_between_sweeps(one_thread: Any) -> None:
    skill, user = one_thread
    due_task(skill, user)
    assert worker.sweep()["processed"] == 1
    first, connected = thread_connection(worker.sweep_threads)
    assert connected, "the sweep closed its thread's connection"
    due_task(skill, user)
    assert worker.sweep()["processed"] == 1
    assert thread_connection(worker.sweep_threads) == (first, True)


def test_a_batch_keeps_its_threads_connections(one_thread: Any) -> None:
    skill, user = one_thread
    process_many([str(due_task(skill, user).pk), str(due_task(skill, user).pk)])
    assert thread_connection(batch_threads)[1]
    assert Task.objects.filter(attempts=1).count() == 2


def test_an_overlapping_caller_gets_threads_of_its_own_kept_for_the_next_overlap() -> None:
    pool = ConnectionPool("lend-test", "A2A_POLL_CONCURRENCY")
    try:
        with pool.lend() as kept:
            with pool.lend() as spare:
                assert spare is not kept
                assert spare.submit(lambda: 1).result(timeout=10) == 1
            # A burst of overlaps reuses it (each new one opened its threads' connections).
            with pool.lend() as again:
                assert again is spare
                # Two overlaps at once: two spares.
                with pool.lend() as other:
                    assert other not in (kept, spare)
        with pool.lend() as first:
            assert first is kept
    finally:
        pool.close()
    with pytest.raises(RuntimeError):  # closed with the pool, connections and all
        spare.submit(lambda: 1)


def test_idle_spares_close_and_at_most_a_few_wait(monkeypatch: Any) -> None:
    now = [1000.0]
    monkeypatch.setattr(dbthreads, "_clock", lambda: now[0])
    monkeypatch.setattr(dbthreads, "SPARES_KEPT", 1)
    pool = ConnectionPool("lend-test", "A2A_POLL_CONCURRENCY")
    try:
        with pool.lend(), pool.lend() as one, pool.lend() as two:
            pass  # given back in reverse: two first (kept), then one
        with pytest.raises(RuntimeError):  # back when SPARES_KEPT wait: closed at once
            one.submit(lambda: 1)
        assert two.submit(lambda: 1).result(timeout=10) == 1
        now[0] += dbthreads.SPARE_IDLE_SECONDS + 1
        with pool.lend():  # any call closes the spares idle that long
            pass
        with pytest.raises(RuntimeError):
            two.submit(lambda: 1)
    finally:
        pool.close()


@pytest.mark.postgres
def test_sweeps_reuse_their_postgresql_sessions(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any
) -> None:
    settings.A2A_POLL_CONCURRENCY = 2
    skill, user = make_skill(), make_user()
    make_agent(skills=[skill])
    backends: set[int] = set()
    run_claimed = worker.run_claimed

    def recording(task: Task) -> None:
        run_claimed(task)
        backends.add(connections["default"].connection.info.backend_pid)

    monkeypatch.setattr(worker, "run_claimed", recording)
    for _ in range(4):
        due_task(skill, user)
        due_task(skill, user)
        assert worker.sweep()["processed"] == 2
    # Two threads, one PostgreSQL session each, for all four sweeps (a new pair per sweep
    # before: eight sessions started).
    assert 1 <= len(backends) <= 2
