"""``a2a_cpu_seconds_total``: the CPU of the platform's threads, by the stage of work."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from platform_site.dbthreads import ConnectionPool
from platform_site.metrics import CPU_SECONDS, cpu_stage


def counted(stage: str) -> float:
    return CPU_SECONDS.labels(stage)._value.get()


def burn() -> int:
    return sum(i * i for i in range(200_000))


def test_a_stage_counts_the_cpu_its_thread_spent_in_it() -> None:
    before = counted("test-burn")
    with cpu_stage("test-burn"):
        burn()
    assert counted("test-burn") > before


def test_a_stage_entered_inside_another_counts_to_the_outer_one() -> None:
    outer, inner = counted("test-outer"), counted("test-inner")
    with cpu_stage("test-outer"), cpu_stage("test-inner"):
        burn()
    assert counted("test-outer") > outer
    assert counted("test-inner") == inner
    with cpu_stage("test-inner"):  # and once out, the stage counts again
        burn()
    assert counted("test-inner") > inner


def test_a_decorated_function_counts_each_call_and_still_raises() -> None:
    @cpu_stage("test-decorated")
    def work(fail: bool) -> int:
        total = burn()
        if fail:
            raise ValueError("boom")
        return total

    before = counted("test-decorated")
    assert work(False) > 0
    after_one = counted("test-decorated")
    assert after_one > before
    with pytest.raises(ValueError, match="boom"):
        work(True)
    assert counted("test-decorated") > after_one


def test_waiting_is_not_cpu() -> None:
    event = threading.Event()
    before = counted("test-wait")
    with cpu_stage("test-wait"):
        event.wait(0.05)
    # a wait costs microseconds of CPU, not its 50 ms of wall time
    assert counted("test-wait") - before < 0.02


def test_other_threads_are_not_counted_in_a_stage() -> None:
    before = counted("test-alone")
    done = threading.Event()

    def elsewhere() -> None:
        burn()
        burn()
        done.set()

    with cpu_stage("test-alone"):
        threading.Thread(target=elsewhere).start()
        done.wait(10)
    with cpu_stage("test-reference"):
        burn()
        burn()
    assert counted("test-alone") - before < counted("test-reference")


def test_a_connection_pool_counts_its_calls_under_its_stage(db: None, settings: Any) -> None:
    settings.TEST_POOL_THREADS = 2
    pool = ConnectionPool("test-pool", "TEST_POOL_THREADS", stage="test-pool-stage")
    try:
        before = counted("test-pool-stage")
        assert asyncio.run(pool.call(burn)()) > 0
        assert counted("test-pool-stage") > before
    finally:
        pool.close()


def test_the_worker_counts_its_actions_under_worker(db: None) -> None:
    from a2a import worker

    before = counted("worker")
    worker.process_task("00000000-0000-0000-0000-000000000000")  # nothing to claim: a read
    assert counted("worker") > before


def test_one_stage_object_serves_several_threads_at_once(monkeypatch: Any) -> None:
    """Two threads inside one stage object at once each count their own CPU time. A fake
    per-thread clock makes the amounts exact: real CPU time for the same work varies too
    much on a loaded machine to compare."""
    from platform_site import metrics

    clocks: dict[int, float] = {}
    fake = SimpleNamespace(thread_time=lambda: clocks[threading.get_ident()])
    monkeypatch.setattr(metrics, "time", fake)
    shared = cpu_stage("test-shared")
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        clocks[threading.get_ident()] = 1.0
        with shared:
            a_inside.set()
            b_inside.wait(10)  # the other thread is inside the same object now
            clocks[threading.get_ident()] = 3.0  # 2 s of this thread's CPU
        a_left.set()

    def second() -> None:
        clocks[threading.get_ident()] = 10.0
        a_inside.wait(10)
        with shared:
            b_inside.set()
            a_left.wait(10)  # the first thread leaves while this one is inside
            clocks[threading.get_ident()] = 15.0  # 5 s of this thread's CPU

    def guarded(work: Any) -> Any:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    before = counted("test-shared")
    threads = [threading.Thread(target=guarded(work)) for work in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors
    assert counted("test-shared") - before == pytest.approx(7.0)
