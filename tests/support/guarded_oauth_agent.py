"""A real a2a-sdk 1.x agent (:mod:`tests.support.agents`) behind a login check the test
switches, with its own OAuth2 token endpoint at ``/oauth/token``.

``guard.mode`` is ``"bearer"`` (``Authorization: Bearer`` :data:`BEARER` passes) or
``"oauth2"`` (a token the endpoint issued passes); anything else gets 401. The token
endpoint's answer is set by ``guard.expires_in`` (None: left out), ``guard.access_token``
(None: a fresh random one), ``guard.token_delay`` (seconds before it answers) and
``guard.hold`` (an event: every ``/oauth/`` request waits for it, at most 30 s);
``guard.counts`` counts requests per path and ``guard.issued`` lists the tokens given out.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support import agents
from tests.support.agents import TestAgent, run_agent

BEARER = "guard-bearer-secret-1234"


class Guard:
    """The login check in front of the agent, and the token endpoint."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.mode = "bearer"
        self.expires_in: Any = 3600
        self.access_token: str | None = None
        self.token_delay = 0.0
        self.hold: threading.Event | None = None
        self.issued: list[str] = []
        self.counts: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        self.counts[path] += 1
        if path.startswith("/oauth/"):
            await self._held()
        if path == "/oauth/token":
            return await self._token(scope, receive, send)
        if path.startswith(("/.well-known/", "/health")):
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if self.mode == "bearer":
            allowed = given == f"Bearer {BEARER}"
        else:
            allowed = given.removeprefix("Bearer ") in self.issued
        if not allowed:
            return await JSONResponse({"error": "unauthorized"}, status_code=401)(
                scope, receive, send
            )
        return await self.app(scope, receive, send)

    async def _held(self) -> None:
        """Until the test sets ``hold`` (bounded, so a broken test fails, never hangs)."""
        if self.hold is not None:
            await asyncio.to_thread(self.hold.wait, 30)

    async def _token(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token_delay:
            await asyncio.sleep(self.token_delay)  # concurrent callers arrive meanwhile
        token = self.access_token or secrets.token_urlsafe(12)
        self.issued.append(token)
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        await JSONResponse(body)(scope, receive, send)


@contextlib.contextmanager
def guarded_agent() -> Iterator[tuple[TestAgent, Guard]]:
    """The agent (its URL is ``peer.url``) and its guard, for the ``with`` block."""
    holder: dict[str, Guard] = {}

    def build(agent: TestAgent) -> ASGIApp:
        holder["guard"] = Guard(agents.build_app(agent))
        return holder["guard"]

    with run_agent(build=build) as peer:
        yield peer, holder["guard"]
