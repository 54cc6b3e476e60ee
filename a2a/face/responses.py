"""Rendering shared by the bindings: JSON bodies and SSE streams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from a2a.face.errors import FaceError, as_face_error
from platform_site.text import json_bytes

JSON_TYPE = "application/json"


def dumps(data: Any) -> bytes:
    return json_bytes(data, default=str)


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> HttpResponse:
    response = HttpResponse(dumps(data), status=status, content_type=JSON_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


# Characters JSON leaves raw that end a line for str.splitlines, which httpx's
# ``aiter_lines`` follows and a2a-sdk's SSE reader uses: raw, one in any text cut the
# event in two and broke the SDK client's stream. Escaped, they are the same JSON.
# (Their UTF-8 bytes occur in no other character's encoding.)
_LINE_ENDS = (
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
    (b"\xc2\x85", b"\\u0085"),
)


def sse_event(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    body = dumps(data)
    for raw, escaped in _LINE_ENDS:
        if raw in body:
            body = body.replace(raw, escaped)
    return head + b"data: " + body + b"\n\n"


async def sse_response(
    stream: AsyncIterator[dict[str, Any] | None],
    wrap: Callable[[dict[str, Any]], Any],
    error_body: Callable[[FaceError], Any],
    *,
    last: Callable[[dict[str, Any]], bool] | None = None,
) -> HttpResponse:
    """An SSE response; the first event is produced before the headers are sent, so a
    failure before the stream starts is an ordinary error response. ``last(event)`` ends
    the stream after that event."""
    first = await anext(stream, None)

    async def events() -> AsyncIterator[bytes]:
        try:
            if first is not None:
                yield sse_event(wrap(first))
                if last is not None and last(first):
                    return
            async for item in stream:
                if item is None:
                    yield b": keepalive\n\n"
                    continue
                yield sse_event(wrap(item))
                if last is not None and last(item):
                    return
        except Exception as exc:  # the stream already started: report in-band
            yield sse_event(error_body(as_face_error(exc)), event="error")
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    response = StreamingHttpResponse(events(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
