"""Helpers for the dispatcher's tests: wait on a task row, boot in-process workers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from a2a.models import Task
from a2a.states import TERMINAL_STATES
from platform_site.celery import app
from platform_site.embedded import EmbeddedWorkers


def wait_for(
    task: Task, until: Callable[[Task], bool] | None = None, timeout: float = 15.0
) -> Task:
    """Re-read ``task`` until ``until(task)`` (default: a final state); fail on timeout."""
    check = until or (lambda t: t.state in TERMINAL_STATES)
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if check(task):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(
                f"task {task.pk} still {task.state} (error {task.error}, next "
                f"{task.next_action!r} at {task.next_poll_at}) after {timeout} s"
            )
        time.sleep(0.05)


@contextmanager
def embedded_workers(sweep_interval: float = 0.3) -> Iterator[EmbeddedWorkers]:
    """The embedded mode's Celery worker (threads) and beat in this process."""
    schedule = dict(app.conf.beat_schedule)
    app.conf.beat_schedule = {
        name: {**entry, "schedule": sweep_interval} if entry.get("task") == "a2a.sweep" else entry
        for name, entry in schedule.items()
    }
    workers = EmbeddedWorkers(concurrency=4)
    workers.start()
    try:
        yield workers
    finally:
        workers.stop()
        app.conf.beat_schedule = schedule


def working(task: Task) -> Task:
    """The agent answered WORKING with its own task and context ids."""
    from a2a import services

    services.apply_agent_update(
        task,
        status={"state": "TASK_STATE_WORKING"},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    return task
