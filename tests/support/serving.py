"""Serving a test peer: free ports, refused URLs, a stdlib HTTP server in a thread, and an
ASGI app under uvicorn in a thread.

Django-free on purpose: benchmarks and ``python -m tests.support.agents`` use it outside
a Django process.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import HTTPServer
from typing import Protocol, TypeVar

import uvicorn
from starlette.types import ASGIApp


class Served(Protocol):
    """What :func:`serve_agent` needs of a peer: where to listen, and an event set on stop
    (hanging handlers wait on it, so the server can shut down)."""

    host: str
    port: int
    stopping: asyncio.Event


PeerT = TypeVar("PeerT", bound=Served)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def down_url() -> str:
    """The URL of a port nobody listens on: every call is refused."""
    return f"http://127.0.0.1:{free_port()}"


@contextlib.contextmanager
def threaded(server: HTTPServer) -> Iterator[str]:
    """Serve ``server`` (bound to 127.0.0.1) on a thread until exit; yields its base URL."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _Server(uvicorn.Server):
    """uvicorn in a thread, woken at once when told to stop: its own main loop looks at
    ``should_exit`` every 0.1 s, a twentieth of a second on average at each of the suite's
    thousand-odd peer stops."""

    woken: asyncio.Event | None = None

    def install_signal_handlers(self) -> None:  # a thread cannot own signals
        pass

    async def main_loop(self) -> None:
        self.woken = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.woken.wait(), 0.1)

    def wake(self) -> None:
        if self.woken is not None:
            self.woken.set()


@contextlib.contextmanager
def serve_agent(agent: PeerT, app: ASGIApp) -> Iterator[PeerT]:
    """Serve ``app`` for ``agent`` (its host and port) with uvicorn in a background
    thread; stopped on exit, its unfinished work ended quietly."""
    config = uvicorn.Config(
        app,
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
        # The event must belong to the server's loop.
        agent.stopping = asyncio.Event()
        loop.run_until_complete(server.serve())
        # Tasks of unfinished agent work (asked, working, hanging): end them quietly.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    name = f"{type(agent).__name__}-{agent.port}"
    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start on port {agent.port}")
        time.sleep(0.02)
    try:
        yield agent
    finally:
        server.should_exit = True
        loop = loop_holder.get("loop")
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(agent.stopping.set)
            loop.call_soon_threadsafe(server.wake)
        thread.join(timeout=10)
