"""Rendering shared by the bindings: JSON bodies, SSE streams and errors."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from a2a.face.errors import (
    ContentTypeNotSupported,
    FaceError,
    InternalError,
    JSONParseError,
    PayloadTooLarge,
)

log = logging.getLogger(__name__)

JSON_TYPE = "application/json"


def dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> HttpResponse:
    response = HttpResponse(dumps(data), status=status, content_type=JSON_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def as_face_error(exc: BaseException) -> FaceError:
    """Any exception as the face error a client should see (unknown ones are logged)."""
    if isinstance(exc, FaceError):
        return exc
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    log.exception("unexpected error in the A2A face", exc_info=exc)
    return InternalError()


def read_json_body(request: HttpRequest, *, required: bool) -> dict[str, Any]:
    """The request's JSON object. The content type is checked before the body is parsed."""
    content_type = request.headers.get("Content-Type")
    body = request.body
    from a2a.face.context import is_json_content_type

    if (body or content_type) and not is_json_content_type(content_type):
        raise ContentTypeNotSupported(
            f"Content type {content_type or '(none)'!r} is not supported; send application/json.",
            metadata={"contentType": (content_type or "")[:100]},
        )
    if not body.strip():
        if required:
            raise JSONParseError("The request body is empty; send a JSON object.")
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JSONParseError(f"Invalid JSON payload: {exc}") from None
    if not isinstance(data, dict):
        raise JSONParseError("The request body must be a JSON object.")
    return data


def sse_event(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + dumps(data) + b"\n\n"


async def sse_response(
    stream: AsyncIterator[dict[str, Any] | None],
    wrap: Callable[[dict[str, Any]], Any],
    error_body: Callable[[FaceError], Any],
) -> HttpResponse:
    """An SSE response; the first event is produced before the headers are sent, so a
    failure before the stream starts is an ordinary error response."""
    first = await anext(stream, None)

    async def events() -> AsyncIterator[bytes]:
        try:
            if first is not None:
                yield sse_event(wrap(first))
            async for item in stream:
                if item is None:
                    yield b": keepalive\n\n"
                    continue
                yield sse_event(wrap(item))
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
