"""A tiny real HTTP server answering fixed responses by path, for agent-card tests.

::

    with serve({"/.well-known/agent-card.json": json_response(card)}) as server:
        server.url  # http://127.0.0.1:PORT

Paths not listed answer 404. A response is ``(status, headers, body)``; the server counts
requests per path (``server.hits``). Routes may be changed while it runs
(``server.routes[path] = ...``), and ``server.delay`` slows every answer.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = tuple[int, dict[str, str], bytes]


def json_response(document: Any, status: int = 200) -> Response:
    return status, {"Content-Type": "application/json"}, json.dumps(document).encode()


def html_response(text: str = "<html><body>Welcome to nginx</body></html>") -> Response:
    return 200, {"Content-Type": "text/html"}, text.encode()


def redirect_response(location: str) -> Response:
    return 302, {"Location": location}, b""


def card_v1(
    url: str, *interfaces: tuple[str, str], streaming: bool = False, **extra: Any
) -> dict[str, Any]:
    """A 1.0 card offering ``(binding, version)`` interfaces at ``url``."""
    return {
        "name": "Card agent",
        "description": "An agent known by its card.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": binding, "protocolVersion": version}
            for binding, version in interfaces
        ],
        "capabilities": {"streaming": streaming, "pushNotifications": False},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [],
        **extra,
    }


def card_v03(url: str, preferred: str = "JSONRPC", **extra: Any) -> dict[str, Any]:
    """A 0.3 card: ``url`` + ``preferredTransport`` (+ ``additionalInterfaces`` in extra)."""
    return {
        "name": "Legacy agent",
        "description": "An A2A 0.3 agent.",
        "version": "0.1.0",
        "protocolVersion": "0.3.0",
        "url": url,
        "preferredTransport": preferred,
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
        **extra,
    }


@dataclass
class CardServer:
    httpd: ThreadingHTTPServer
    routes: dict[str, Response]
    hits: Counter[str] = field(default_factory=Counter)
    delay: float = 0.0  # seconds before each answer (a slow agent)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"


@contextlib.contextmanager
def serve(routes: dict[str, Response] | None = None) -> Iterator[CardServer]:
    """Serve ``routes`` on a free 127.0.0.1 port in a thread; stopped on exit."""
    holder: dict[str, CardServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server = holder["server"]
            path = self.path.split("?")[0]
            server.hits[path] += 1
            time.sleep(server.delay)
            status, headers, body = server.routes.get(path, (404, {}, b"not found"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    holder["server"] = CardServer(httpd, dict(routes or {}))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["server"]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
