"""A client of the real A2A face (:class:`~a2a.face.asgi.FaceASGIHandler`) that keeps its
request open: the answer is read as it comes (a stream's events), and the client stays
until :meth:`FaceStream.leave`, as a browser tab or an SDK client does."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from a2a.face.asgi import FaceASGIHandler


class FaceStream:
    """One request (``scope``, ``body``) to the face, open until :meth:`leave`."""

    def __init__(self, scope: dict[str, Any], body: bytes = b"") -> None:
        self.scope, self.body = scope, body
        self.sent: list[dict[str, Any]] = []
        self.chunk = asyncio.Event()
        self.gone = asyncio.Event()
        self.handler: asyncio.Task[None] | None = None

    async def open(self) -> FaceStream:
        """Send the request; return once the answer's first body has come."""
        asked = 0

        async def receive() -> dict[str, Any]:
            nonlocal asked
            asked += 1
            if asked == 1:
                return {"type": "http.request", "body": self.body, "more_body": False}
            await self.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            self.sent.append(message)
            if message["type"] == "http.response.body":
                self.chunk.set()

        self.handler = asyncio.create_task(FaceASGIHandler()(self.scope, receive, send))
        await asyncio.wait_for(self.chunk.wait(), 15)
        return self

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    def body_bytes(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    def json(self) -> Any:
        """The whole answer as JSON (a refusal's)."""
        return json.loads(self.body_bytes())

    def events(self) -> list[tuple[str, Any]]:
        """``(event name, data)`` of every SSE event so far ("" for a plain data event)."""
        found = []
        for frame in self.body_bytes().decode().split("\n\n"):
            name = ""
            for line in frame.splitlines():
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    found.append((name, json.loads(line.removeprefix("data: "))))
        return found

    async def wait_events(self, count: int) -> None:
        """Wait until ``count`` events have come (keep-alives are no events)."""
        deadline = time.monotonic() + 15
        while len(self.events()) < count:
            self.chunk.clear()
            assert time.monotonic() < deadline, f"no event came: {self.events()}"
            await asyncio.wait_for(self.chunk.wait(), 15)

    async def ended(self) -> bool:
        """Whether the server ended the stream on its own within 5 s."""
        assert self.handler is not None
        done, _ = await asyncio.wait({self.handler}, timeout=5)
        return bool(done)

    async def leave(self) -> None:
        self.gone.set()
        assert self.handler is not None
        await asyncio.wait_for(self.handler, 15)
