"""SendStreamingMessage's ``configuration.historyLength`` bounds the stream's first event
(the Task), as it bounds message:send's answer: "The server MUST NOT return more messages
than the provided value" (A2A 1.0, SendMessageConfiguration.history_length). The stream
took the whole history. SubscribeToTask, which has no such setting, keeps all of it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.db import connections

from a2a.face.db import close_pool
from a2a.models import Task
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    """A new channel layer per test (the Redis layer keeps its receive state per loop)."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    close_pool()


def _first_task(path: str, token: str, body: dict[str, Any], version: str = "1.0") -> Any:
    """The Task of the stream's first event (the stream is left right after it)."""
    raw = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"a2a-version", version.encode()),
        (b"content-length", str(len(raw)).encode()),
        (b"authorization", f"Bearer {token}".encode()),
    ]

    async def scenario() -> Any:
        try:
            stream = FaceStream(http_scope(path, method="POST", headers=headers), raw)
            await stream.open()
            await stream.wait_events(1)
            await stream.leave()
            assert stream.status == 200, stream.sent
            data = stream.events()[0][1]
            return data.get("result", data)
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(scenario())


def _message(**fields: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "EU"}]} | fields


def test_the_first_event_of_a_streamed_send_holds_at_most_history_length_messages(
    alice: Any, agent: Any, make_task: Callable[..., Task]
) -> None:
    # A task asking a question (a status, not a history message): one message so far.
    asked = make_task(alice)
    asked.require_input(QUESTION)
    reply = _message(taskId=str(asked.id))
    task = _first_task(
        "/v1/a2a/message:stream",
        alice.raw_token,
        {"message": reply, "configuration": {"historyLength": 1}},
    )["task"]
    assert [m["parts"] for m in task["history"]] == [reply["parts"]]  # the reply alone
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": _message(), "configuration": {"historyLength": 0}},
    }
    assert "history" not in _first_task("/v1/a2a/jsonrpc", alice.raw_token, rpc)["task"]
    legacy = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "message/stream",
        "params": {
            "message": {"kind": "message", **_message(parts=[{"kind": "text", "text": "EU"}])},
            "configuration": {"historyLength": 0},
        },
    }
    assert "history" not in _first_task("/v1/a2a/jsonrpc", alice.raw_token, legacy, "")
    # Subscribing has no historyLength: the whole history, the reply included.
    subscribed = _first_task(f"/v1/a2a/tasks/{asked.id}:subscribe", alice.raw_token, {})["task"]
    assert [m["parts"] for m in subscribed["history"]] == [[{"text": "hello"}], reply["parts"]]
