"""A real A2A 1.0 peer that pushes: the test agent of :mod:`tests.support.agents` with the
``a2a-sdk``'s own push machinery (an in-memory config store and
``BasePushNotificationSender``) and ``capabilities.pushNotifications`` on its card.

When a send carries ``configuration.taskPushNotificationConfig``, the SDK stores it and
POSTs every later event of that task (status updates, artifact updates) as a
``StreamResponse`` to the config's URL with its token (``X-A2A-Notification-Token``) and
``authentication`` (``Authorization``). Behaviours are those of the plain test agent
(``input["behaviour"]``). ``peer.pushes`` counts the POSTs the sender made, and
``peer.push_failures`` those that failed.

    with run_push_agent() as peer:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
)
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from tests.support.agents import TestAgent, agent_card
from tests.support.behaviours import VALID_OUTPUT, BehaviourExecutor
from tests.support.raw_modes import RawModes
from tests.support.serving import free_port, serve_agent

log = logging.getLogger(__name__)


class PushAgent(TestAgent):
    """A :class:`TestAgent` that also counts its pushes."""

    __test__ = False

    pushes: int = 0
    push_failures: int = 0
    pushing: int = 0  # posts in flight
    last_push_at: float = 0.0

    def wait_pushes_settled(self, quiet: float = 0.5, timeout: float = 10.0) -> None:
        """Wait until no push is in flight and none started for ``quiet`` seconds.

        The SDK pushes a task's last events after the platform has already recorded
        its end: a test that stops the platform right then would see those pushes fail
        against a closing server, through no fault of either side."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.pushing and time.monotonic() - self.last_push_at >= quiet:
                return
            time.sleep(0.05)
        raise AssertionError(f"the agent kept pushing for {timeout} s")


class CountingClient(httpx.AsyncClient):
    """The push sender's HTTP client, counting what it posts and what failed."""

    def __init__(self, agent: PushAgent) -> None:
        super().__init__(timeout=10)
        self.agent = agent

    async def post(self, url: Any, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        self.agent.pushes += 1
        self.agent.pushing += 1
        self.agent.last_push_at = time.monotonic()
        try:
            response = await super().post(url, **kwargs)
        except httpx.HTTPError:
            self.agent.push_failures += 1
            raise
        finally:
            self.agent.pushing -= 1
            self.agent.last_push_at = time.monotonic()
        if response.status_code >= 400:
            self.agent.push_failures += 1
        return response


def push_card(url: str) -> pb.AgentCard:
    card = agent_card(url)
    card.capabilities.push_notifications = True
    return card


def build_push_app(agent: PushAgent, card_url: str | None = None) -> ASGIApp:
    card = push_card(card_url or agent.url)
    store = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=BehaviourExecutor(agent),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=store,
        push_sender=BasePushNotificationSender(CountingClient(agent), store),
    )
    routes = [
        Route("/health", lambda request: JSONResponse({"ok": True})),
        *create_agent_card_routes(card),
        *create_rest_routes(handler),
    ]
    return RawModes(Starlette(routes=routes), agent, output=VALID_OUTPUT)


@contextlib.contextmanager
def run_push_agent(port: int | None = None, *, card_host: str = "") -> Iterator[PushAgent]:
    """Serve a pushing agent in a background thread; stopped on exit. ``card_host``: the
    host its card names instead of 127.0.0.1 (an agent known by a name that does not
    say it is on this machine; the test resolves the name)."""
    agent = PushAgent(port=port or free_port())
    card_url = f"http://{card_host}:{agent.port}" if card_host else None
    with serve_agent(agent, build_push_app(agent, card_url)):
        yield agent


def main() -> None:
    """``python -m tests.support.push_agents [PORT]``: serve it in the foreground."""
    import sys

    with run_push_agent(int(sys.argv[1]) if len(sys.argv) > 1 else None) as agent:
        print(f"push agent on {agent.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
