"""The SSE framing shared by both bindings: data lines, keep-alive comments, in-band
errors after the stream started, and errors before it as ordinary responses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a.face.errors import TaskNotFound, rest_error_body
from a2a.face.responses import sse_response


async def _events(*items: Any, fail: Exception | None = None) -> AsyncIterator[Any]:
    for item in items:
        yield item
    if fail is not None:
        raise fail


def _render(stream: AsyncIterator[Any]) -> tuple[Any, bytes]:
    """The response and its whole body, in one event loop (as a server would)."""

    async def run() -> tuple[Any, bytes]:
        response = await sse_response(stream, lambda e: e, lambda err: rest_error_body(err)[1])
        return response, b"".join([chunk async for chunk in response.streaming_content])

    return asyncio.run(run())


def test_events_are_data_lines_and_quiet_periods_are_comments() -> None:
    response, body = _render(
        _events({"task": {"id": "t"}}, None, {"statusUpdate": {"taskId": "t"}})
    )
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-cache"
    frames = body.split(b"\n\n")
    assert json.loads(frames[0].removeprefix(b"data: ")) == {"task": {"id": "t"}}
    assert frames[1] == b": keepalive"
    assert json.loads(frames[2].removeprefix(b"data: ")) == {"statusUpdate": {"taskId": "t"}}


def test_a_failure_after_the_first_event_is_an_error_event() -> None:
    _response, body = _render(_events({"task": {"id": "t"}}, fail=TaskNotFound("gone")))
    frames = body.split(b"\n\n")
    assert frames[1].startswith(b"event: error\ndata: ")
    error = json.loads(frames[1].split(b"data: ", 1)[1])
    assert error["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


def test_a_failure_before_the_first_event_raises_before_any_stream() -> None:
    with pytest.raises(TaskNotFound):
        _render(_events(fail=TaskNotFound("gone")))
