"""A small A2A 1.0 HTTP+JSON agent whose ``ListTasks`` a test scripts (hostile or broken).

The a2a-sdk peer (:mod:`tests.support.agents`) lists honestly; this one answers
``GET /tasks`` with whatever ``agent.list_handler`` returns (status, headers, body), so a
test can page forever, send huge pages, odd timestamps, or hang. Sends create a WORKING
task (``r-1``, ``r-2``...); ``GetTask`` answers the task as ``agent.tasks`` holds it
(:meth:`HostileAgent.set` changes it); its card is the test peer's, without streaming.
Served by a ``ThreadingHTTPServer`` on 127.0.0.1::

    with hostile_agent() as agent:
        make_agent(skills=[skill], a2a_endpoint=agent.url, card_read_at=timezone.now())
        agent.list_handler = lambda query: agent.page(list(agent.tasks.values()), "again")
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Answer = tuple[int, dict[str, str], bytes]


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class HostileAgent:
    """The agent's tasks (remote id -> A2A Task), its scripted ``ListTasks``, the
    requests it got (``"GET /tasks?..."``, ``"POST /message:send"``...)."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.tasks: dict[str, dict[str, Any]] = {}
        # The query (parse_qs) of a GET /tasks -> its answer; None: every task, one page.
        self.list_handler: Callable[[dict[str, list[str]]], Answer] | None = None
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def page(tasks: list[dict[str, Any]], token: str = "") -> Answer:
        """A ListTasksResponse of ``tasks`` (200)."""
        return 200, {}, json.dumps({"tasks": tasks, "nextPageToken": token}).encode()

    def set(self, remote_id: str, state: str, stamp: str | None = None, **extra: Any) -> None:
        """The agent's task changes: ``state`` at ``stamp`` (now), with ``extra`` fields."""
        status = {"state": state, "timestamp": stamp or now_iso()}
        self.tasks[remote_id] = {**self.tasks[remote_id], "status": status, **extra}

    def card(self) -> dict[str, Any]:
        """Its agent card: HTTP+JSON 1.0 at its URL, no streaming, no push."""
        from google.protobuf.json_format import MessageToDict

        from tests.support.agents import agent_card

        card = MessageToDict(agent_card(self.url))
        card["capabilities"] = {"streaming": False, "pushNotifications": False}
        return card

    def listings(self) -> int:
        """The ``GET /tasks`` (ListTasks) requests so far."""
        with self.lock:
            return sum(1 for request in self.requests if request.startswith("GET /tasks?"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(agent: HostileAgent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(code)
            for key, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the platform gave up waiting
                self.wfile.write(body)

        def do_GET(self) -> None:
            with agent.lock:
                agent.requests.append("GET " + self.path)
            url = urlparse(self.path)
            if url.path == "/.well-known/agent-card.json":
                return self._send(200, {}, json.dumps(agent.card()).encode())
            if url.path == "/tasks":
                if agent.list_handler is not None:
                    return self._send(*agent.list_handler(parse_qs(url.query)))
                return self._send(*agent.page(list(agent.tasks.values())))
            task = agent.tasks.get(url.path.removeprefix("/tasks/"))
            if not url.path.startswith("/tasks/") or task is None:
                return self._send(404, {}, b'{"error":{"code":404,"status":"NOT_FOUND"}}')
            return self._send(200, {}, json.dumps(task).encode())

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            with agent.lock:
                agent.requests.append("POST " + self.path)
            if not self.path.endswith("/message:send"):
                return self._send(200, {}, b"{}")
            remote_id = (body.get("message") or {}).get("taskId") or f"r-{next(agent.ids)}"
            working = {"state": "TASK_STATE_WORKING", "timestamp": now_iso()}
            task = {"id": remote_id, "contextId": f"ctx-{remote_id}", "status": working}
            agent.tasks[remote_id] = {**agent.tasks.get(remote_id, task), "status": working}
            # Its Date (send_response's) is the agent's clock: it places the listing cursor.
            return self._send(200, {}, json.dumps({"task": agent.tasks[remote_id]}).encode())

    return Handler


@contextlib.contextmanager
def hostile_agent() -> Iterator[HostileAgent]:
    agent = HostileAgent()
    try:
        yield agent
    finally:
        agent.close()
