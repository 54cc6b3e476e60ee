"""A real a2a-sdk 1.x test agent (:mod:`tests.support.agents`) behind a login check the
test switches: every A2A call must carry ``Authorization: Bearer`` :data:`BEARER`, and
with ``guard.reject`` set every one is refused (``guard.status``, 401 by default), as
after the agent's owner rotated its token. The card and ``/health`` stay open; what
was asked is counted per path (``guard.counts``).

Used to see what the platform does when an agent starts refusing its credential while
it follows a task the agent accepted (``tests/a2a/test_auth_failure_while_following.py``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support import agents
from tests.support.agents import TestAgent, run_agent

BEARER = "login-guard-bearer-secret-1234"


class LoginGuard:
    """ASGI middleware: the agent's A2A routes only for the right bearer token, and for
    nobody while ``reject`` is set."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.reject = False  # refuse every A2A call (the token was rotated at the agent)
        self.status = 401
        self.counts: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        self.counts[path] += 1
        if path.startswith(("/.well-known/", "/health")):
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if self.reject or headers.get("authorization", "") != f"Bearer {BEARER}":
            refusal = JSONResponse({"error": "unauthorized"}, status_code=self.status)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def polls(self) -> int:
        """``GetTask`` requests received (``GET /tasks/{id}``)."""
        return sum(
            n
            for path, n in self.counts.items()
            if path.startswith("/tasks/") and not path.endswith(":subscribe")
        )


@contextlib.contextmanager
def login_guarded_agent() -> Iterator[tuple[TestAgent, LoginGuard]]:
    """Serve the test agent behind a :class:`LoginGuard`; yields both."""
    holder: dict[str, LoginGuard] = {}

    def build(agent: TestAgent) -> Any:
        holder["guard"] = LoginGuard(agents.build_app(agent))
        return holder["guard"]

    with run_agent(build=build) as peer:
        yield peer, holder["guard"]
