"""Calls straight through an ASGI app: the scope and messages a server would send, including
what no HTTP client library sends (a client that goes away, raw bytes)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]


def http_scope(
    path: str,
    *,
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    query: bytes = b"",
    host: bytes = b"127.0.0.1",
) -> dict[str, Any]:
    """An HTTP request's scope as daphne builds it (``host`` first among the headers)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", host), *(headers or [])],
        "client": ("127.0.0.1", 5000),
        "server": (host.decode(), 80),
    }


def body_then_gone(body: bytes) -> Callable[[], Awaitable[Message]]:
    """``receive`` of a client that sends ``body`` and then goes away: from then on every
    call answers ``http.disconnect``, as a server keeps answering."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop()
        await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    return receive


def recording(sent: list[Message]) -> Callable[[Message], Awaitable[None]]:
    """``send`` that keeps what the app sent (a server drops what goes to a closed
    connection, so the app must not care)."""

    async def send(message: Message) -> None:
        sent.append(message)

    return send
