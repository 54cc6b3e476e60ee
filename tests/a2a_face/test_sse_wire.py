"""The SSE framing shared by both bindings: data lines, keep-alive comments, in-band
errors after the stream started, and errors before it as ordinary responses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
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


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_the_official_client_reads_an_event_whose_text_holds_a_unicode_line_end(
    separator: str,
) -> None:
    """a2a-sdk's SSE reader splits lines as ``str.splitlines`` does (httpx's
    ``aiter_lines``), which ends a line at U+2028, U+2029 and U+0085 too: sent raw, one
    in any text cut the event's JSON in two and the client's stream failed."""
    from a2a.client.transports.http_helpers import parse_sse_stream

    text = f"line one{separator}line two é 文 🛋"
    _, body = _render(_events({"task": {"id": "t", "text": text}}))

    async def read() -> list[str]:
        response = httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return [data async for _, data in parse_sse_stream(response)]

    assert [json.loads(data) for data in asyncio.run(read())] == [
        {"task": {"id": "t", "text": text}}
    ]
    assert "é 文 🛋".encode() in body  # the rest of the text goes as itself
