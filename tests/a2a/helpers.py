"""Helpers for the dispatcher's tests: wait on a task row, boot in-process workers, push
to the webhook."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from a2a.models import Task
from a2a.states import TERMINAL_STATES

# Imported with this module, not at a test's first push: building the ASGI app sets
# Django up, whose logging configuration replaces the root logger's handlers, pytest's
# log capture among them (a test alone then captured no line).
from platform_site.asgi import application
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


def lose_new_tasks_hints(monkeypatch: Any) -> None:
    """New tasks are neither claimed at birth for this process's threads nor hinted: only
    the sweep finds them."""
    from a2a import creation, local_dispatch

    monkeypatch.setattr(local_dispatch, "starts_soon", lambda count: False)
    monkeypatch.setattr(creation, "queue_processing_many", lambda *a, **k: None)


def working(task: Task, remote_id: str = "r-1") -> Task:
    """The agent answered WORKING with its own task (``remote_id``) and context ids."""
    from a2a import agent_updates

    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_WORKING"},
        remote={"id": remote_id, "contextId": "c-1"},
        via="a2a",
    )
    return task


def post(path: str, body: Any, token: str | None, **kwargs: Any) -> httpx.Response:
    """POST ``body`` (JSON unless bytes or text) to the ASGI app, with a push token."""
    headers = {"X-A2A-Notification-Token": token} if token else {}
    headers.update(kwargs.pop("headers", {}))
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.post(path, content=content, headers=headers, **kwargs)

    return asyncio.run(run())


def status_update(state: str, timestamp: str | None = None, **extra: Any) -> dict[str, Any]:
    """A pushed ``statusUpdate`` for the agent task ``agent-task-1`` (the ``pushed_task``
    fixture's), with the status's ``timestamp`` and other fields when given."""
    update: dict[str, Any] = {
        "taskId": "agent-task-1",
        "contextId": "c",
        "status": {"state": state},
    }
    if timestamp:
        update["status"]["timestamp"] = timestamp
    update["status"].update(extra)
    return {"statusUpdate": update}


def push(task: Task, body: Any, *, token: str | None = "", attempt: int = 1) -> httpx.Response:
    """Push ``body`` to the task's webhook, with its token unless ``token`` is given."""
    from a2a import agent_push_tokens

    if token == "":
        token = agent_push_tokens.token_for(task.pk, task.agent_id, attempt)
    return post(f"/api/a2a/push/{task.pk}/{task.agent_id}/{attempt}", body, token)


T3 = "2026-12-01T10:00:03Z"


def done(output: Any, timestamp: str = T3) -> dict[str, Any]:
    """A push of the agent's task ``agent-task-1``, COMPLETED with ``output``."""
    return {
        "task": {
            "id": "agent-task-1",
            "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": timestamp},
            "artifacts": [{"artifactId": "a1", "parts": [{"data": output}]}],
        }
    }


def fresh(task: Task) -> Task:
    task.refresh_from_db()
    return task
