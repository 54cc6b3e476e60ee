"""The streamed-task marker (a2a/face/listeners.py): with the Redis channel layer a
transition is published only when some process's stream listens to the task."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from a2a.face import listeners, sse
from a2a.models import Task

pytestmark = pytest.mark.distributed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_task_nobody_streams_has_no_listener() -> None:
    assert sse.has_listeners(uuid.uuid4()) is False


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)  # the face's database thread sees the task
async def test_an_open_subscription_marks_its_task_for_every_process(make_task: Any) -> None:
    task = await sync_to_async(make_task)()
    assert task.watched is False
    try:
        async with sse.Subscription(task.id):
            assert sse.has_listeners(task.id) is True
            # The row first: a transition's after-commit asks Redis only for a watched task.
            assert await sync_to_async(lambda: Task.objects.get(pk=task.pk).watched)() is True
    finally:
        await sync_to_async(connections.close_all)()
    # The mark outlives the subscription by at most its time to live: a useless publish
    # at worst, never a missed one.
    assert 0 < listeners._redis().pttl(listeners._key(task.id)) <= listeners.ttl_seconds() * 1000


def test_a_transition_of_an_unwatched_task_does_not_ask_redis(monkeypatch: Any) -> None:
    """``watched`` False from the transition: nobody subscribed before it was written, so
    the snapshot a later subscriber reads has it; Redis is not asked."""
    asked: list[Any] = []
    monkeypatch.setattr(listeners, "is_marked", lambda task_id: asked.append(task_id) or True)
    task_id = uuid.uuid4()
    assert sse.has_listeners(task_id, watched=False) is False
    assert asked == []
    assert sse.has_listeners(task_id, watched=True) is True
    assert sse.has_listeners(task_id) is True  # not known: ask
    assert asked == [task_id, task_id]


def test_when_redis_cannot_answer_a_listener_is_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    from platform_site import redis_clients

    monkeypatch.setattr(redis_clients, "_clients", {})  # a client for the URL below
    monkeypatch.setattr(listeners.settings, "REDIS_URL", "redis://127.0.0.1:9/0")
    assert listeners.is_marked(uuid.uuid4()) is True
    listeners.mark(uuid.uuid4())  # logs, does not raise
