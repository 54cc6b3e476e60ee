"""platform_site.elastic_pool: a job that steps aside leaves the pool its width of free
threads; stopping waits for the pool's own jobs, never for those that stepped aside."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from platform_site import elastic_pool
from platform_site.elastic_pool import ElasticPool


class Jobs:
    """Jobs that wait for their own event; records the thread each ran on."""

    def __init__(self) -> None:
        self.go: dict[str, threading.Event] = {}
        self.started: dict[str, threading.Thread] = {}
        self.pools: dict[str, ElasticPool | None] = {}
        self.done: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, name: str) -> None:
        with self.lock:
            self.started[name] = threading.current_thread()
            self.pools[name] = elastic_pool.current()
        self.go.setdefault(name, threading.Event()).wait(10)
        with self.lock:
            self.done.append(name)

    def release(self, name: str) -> None:
        self.go.setdefault(name, threading.Event()).set()

    def wait_started(self, *names: str) -> None:
        deadline = time.monotonic() + 5
        while not all(name in self.started for name in names):
            assert time.monotonic() < deadline, f"not started: {names}"
            time.sleep(0.01)

    def wait_done(self, *names: str) -> None:
        deadline = time.monotonic() + 5
        while not all(name in self.done for name in names):
            assert time.monotonic() < deadline, f"not done: {names}"
            time.sleep(0.01)


@pytest.fixture
def jobs() -> Jobs:
    return Jobs()


def test_a_job_that_steps_aside_leaves_its_place_to_a_new_thread(jobs: Jobs) -> None:
    pool = ElasticPool(1, "test", jobs)
    try:
        pool.submit("long")
        pool.submit("next")
        jobs.wait_started("long")
        assert jobs.pools["long"] is pool
        assert pool.pending() == 2
        time.sleep(0.1)
        assert "next" not in jobs.started  # one thread, busy
        assert pool.step_aside(jobs.started["long"]) is True
        jobs.wait_started("next")  # the new thread took it
        assert jobs.started["next"] is not jobs.started["long"]
        assert pool.pending() == 1  # the job that stepped aside holds no place
        assert pool.step_aside(jobs.started["long"]) is False  # once
        jobs.release("long")
        jobs.wait_done("long")
        jobs.started["long"].join(5)
        assert not jobs.started["long"].is_alive()  # it ended with its job
        jobs.release("next")
        jobs.wait_done("next")
        pool.submit("again")
        jobs.release("again")
        jobs.wait_done("again")
        assert jobs.started["again"] is jobs.started["next"]  # the pool's thread stays
        assert pool.pending() == 0
    finally:
        for name in ("long", "next", "again"):
            jobs.release(name)
        pool.stop()


def test_stop_waits_for_the_pools_jobs_but_not_for_those_that_stepped_aside(
    jobs: Jobs,
) -> None:
    pool = ElasticPool(2, "test", jobs)
    pool.submit("aside")
    pool.submit("running")
    jobs.wait_started("aside", "running")
    pool.submit("queued")  # no free thread: never run
    assert pool.step_aside(jobs.started["aside"])
    jobs.wait_started("queued")  # the replacement took it
    pool.submit("left")  # waits for a thread when the pool stops
    stopper = threading.Thread(target=pool.stop)
    stopper.start()
    time.sleep(0.2)
    assert stopper.is_alive()  # waiting for "running" and "queued"
    jobs.release("running")
    jobs.release("queued")
    stopper.join(5)
    assert not stopper.is_alive()  # "aside" still runs: not waited for
    assert "left" not in jobs.started
    assert pool.pending() == 0
    with pytest.raises(RuntimeError):
        pool.submit("late")
    jobs.release("aside")
    jobs.wait_done("aside")


def test_a_thread_outside_a_pool_has_none(jobs: Jobs) -> None:
    assert elastic_pool.current() is None
    pool = ElasticPool(1, "test", jobs)
    assert pool.step_aside(threading.current_thread()) is False
    pool.submit("one")
    jobs.release("one")
    jobs.wait_done("one")
    pool.stop()
    assert jobs.pools["one"] is pool


def test_a_job_that_raises_does_not_take_its_thread(jobs: Any) -> None:
    ran: list[str] = []

    def run(name: str) -> None:
        ran.append(name)
        if name == "bad":
            raise ValueError(name)

    pool = ElasticPool(1, "test", run)
    pool.submit("bad")
    pool.submit("good")
    deadline = time.monotonic() + 5
    while ran != ["bad", "good"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pool.stop()
    assert pool.pending() == 0


def test_it_has_room_while_fewer_jobs_wait_or_run_than_it_has_threads(jobs: Jobs) -> None:
    """What the sweep asks before it hands a claimed send over: a job queued behind busy
    threads would wait while its claim runs out."""
    pool = ElasticPool(2, "test", jobs)
    try:
        assert pool.has_room()
        pool.submit("a")
        assert pool.has_room()
        pool.submit("b")
        assert not pool.has_room()
        jobs.wait_started("a", "b")
        assert pool.step_aside(jobs.started["a"])  # its place taken by a new thread
        assert pool.has_room()
        jobs.release("b")
        jobs.wait_done("b")
        deadline = time.monotonic() + 5
        while pool.pending():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        pool.submit("c")
        pool.submit("d")
        assert not pool.has_room()
        # Within two rounds of jobs (where new tasks are claimed at birth): two more.
        assert pool.has_room(2, rounds=2)
        assert not pool.has_room(3, rounds=2)
    finally:
        for name in "abcd":
            jobs.release(name)
        pool.stop()
