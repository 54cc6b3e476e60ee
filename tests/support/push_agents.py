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

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn
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

from tests.support.agents import BehaviourExecutor, RawModes, TestAgent, agent_card, free_port

log = logging.getLogger(__name__)


class PushAgent(TestAgent):
    """A :class:`TestAgent` that also counts its pushes."""

    __test__ = False

    pushes: int = 0
    push_failures: int = 0


class CountingClient(httpx.AsyncClient):
    """The push sender's HTTP client, counting what it posts and what failed."""

    def __init__(self, agent: PushAgent) -> None:
        super().__init__(timeout=10)
        self.agent = agent

    async def post(self, url: Any, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        self.agent.pushes += 1
        try:
            response = await super().post(url, **kwargs)
        except httpx.HTTPError:
            self.agent.push_failures += 1
            raise
        if response.status_code >= 400:
            self.agent.push_failures += 1
        return response


def push_card(url: str) -> pb.AgentCard:
    card = agent_card(url)
    card.capabilities.push_notifications = True
    return card


def build_push_app(agent: PushAgent) -> ASGIApp:
    card = push_card(agent.url)
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
    return RawModes(Starlette(routes=routes), agent)


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # a thread cannot own signals
        pass


@contextlib.contextmanager
def run_push_agent(port: int | None = None) -> Iterator[PushAgent]:
    """Serve a pushing agent in a background thread; stopped on exit."""
    agent = PushAgent(port=port or free_port())
    config = uvicorn.Config(
        build_push_app(agent),
        host=agent.host,
        port=agent.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = _Server(config)
    loop_holder: dict[str, asyncio.AbstractEventLoop] = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        loop_holder["loop"] = loop
        asyncio.set_event_loop(loop)
        agent.stopping = asyncio.Event()
        loop.run_until_complete(server.serve())
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    thread = threading.Thread(target=serve, name=f"push-agent-{agent.port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"push agent did not start on port {agent.port}")
        time.sleep(0.02)
    try:
        yield agent
    finally:
        loop = loop_holder.get("loop")
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(agent.stopping.set)
        server.should_exit = True
        thread.join(timeout=10)


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
