"""The streamed-task marker (a2a/face/listeners.py): with the Redis channel layer a
transition is published only when some process's stream listens to the task."""

from __future__ import annotations

import uuid

import pytest

from a2a.face import listeners, sse

pytestmark = pytest.mark.distributed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_task_nobody_streams_has_no_listener() -> None:
    assert sse.has_listeners(uuid.uuid4()) is False


@pytest.mark.anyio
async def test_an_open_subscription_marks_its_task_for_every_process() -> None:
    task_id = uuid.uuid4()
    async with sse.Subscription(task_id):
        assert sse.has_listeners(task_id) is True
    # The mark outlives the subscription by at most its time to live: a useless publish
    # at worst, never a missed one.
    assert 0 < listeners._redis().pttl(listeners._key(task_id)) <= listeners.ttl_seconds() * 1000


def test_when_redis_cannot_answer_a_listener_is_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    from platform_site import redis_clients

    monkeypatch.setattr(redis_clients, "_clients", {})  # a client for the URL below
    monkeypatch.setattr(listeners.settings, "REDIS_URL", "redis://127.0.0.1:9/0")
    assert listeners.is_marked(uuid.uuid4()) is True
    listeners.mark(uuid.uuid4())  # logs, does not raise
