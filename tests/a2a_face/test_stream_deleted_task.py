"""A task deleted while streamed (the admin's delete) ends its open streams with the
binding's TASK_NOT_FOUND error, in-band, not with a silent end a client cannot tell from a
dropped connection; the stream's slot is given back. Runs on the in-memory layer (SQLite
pass) and the Redis layer (PostgreSQL pass)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.db import connections

from a2a.face import sse
from a2a.face.db import close_pool
from a2a.face.errors import TaskNotFound
from a2a.face.stream_slots import stream_slots
from a2a.models import Task
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quick_rereads(settings: Any) -> Iterator[None]:
    """A quiet stream re-reads its task every 0.1 s (a delete publishes no event); a fresh
    channel layer per test (the Redis layer keeps its receive state per loop)."""
    settings.A2A_STREAM_RECHECK = 0.1
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    close_pool()


def _subscribe(binding: str, task: Task, token: str) -> FaceStream:
    """``SubscribeToTask`` on HTTP+JSON ("rest"), JSON-RPC 1.0 ("rpc") or 0.3's
    ``tasks/resubscribe`` ("rpc-0.3")."""
    version = b"0.3" if binding == "rpc-0.3" else b"1.0"
    headers = [(b"a2a-version", version), (b"authorization", f"Bearer {token}".encode())]
    if binding == "rest":
        return FaceStream(http_scope(f"/v1/a2a/tasks/{task.id}:subscribe", headers=headers))
    method = "tasks/resubscribe" if binding == "rpc-0.3" else "SubscribeToTask"
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"id": str(task.id)}})
    headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    scope = http_scope("/v1/a2a/jsonrpc", method="POST", headers=headers)
    return FaceStream(scope, body.encode())


@pytest.mark.parametrize("binding", ["rest", "rpc", "rpc-0.3"])
def test_a_stream_of_a_task_deleted_meanwhile_ends_with_task_not_found(
    binding: str, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.start_work("go")

    async def scenario() -> tuple[FaceStream, bool]:
        stream = await _subscribe(binding, task, alice.raw_token).open()
        await stream.wait_events(1)
        await sync_to_async(Task.objects.filter(pk=task.pk).delete)()
        ended = await stream.ended()
        if not ended:
            await stream.leave()
        await sync_to_async(connections.close_all)()
        return stream, ended

    stream, ended = asyncio.run(scenario())
    assert stream.status == 200
    assert ended, f"the stream went on: {stream.body_bytes()!r}"
    events = stream.events()
    assert len(events) == 2, events  # the task, then the error
    name, data = events[1]
    assert name == "error"
    if binding == "rest":
        error = data["error"]
        assert (error["code"], error["status"]) == (404, "NOT_FOUND")
        assert error["details"][0]["reason"] == "TASK_NOT_FOUND"
    else:
        assert (data["jsonrpc"], data["id"]) == ("2.0", 7)
        assert data["error"]["code"] == -32001
    assert str(task.id) in json.dumps(data)
    assert stream_slots._open == {}  # the stream's slot was given back


def test_a_stream_of_a_task_gone_before_its_first_event_raises_task_not_found(
    alice: Any, make_task: Callable[..., Task]
) -> None:
    """Deleted between the caller's check and the stream's first read: an ordinary
    TASK_NOT_FOUND answer (the binding's error response), not an empty 200 stream."""
    task = make_task(alice)
    task_id = task.id
    task.delete()

    async def scenario() -> None:
        try:
            with pytest.raises(TaskNotFound, match=str(task_id)):
                await anext(sse.task_stream(task_id))
        finally:
            await sync_to_async(connections.close_all)()

    asyncio.run(scenario())
