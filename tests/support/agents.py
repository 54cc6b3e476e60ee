"""A real A2A 1.0 peer for tests and benchmarks, built with the official ``a2a-sdk``.

:func:`run_agent` starts one Starlette app under uvicorn on a free ``127.0.0.1`` port in a
background thread and yields a :class:`TestAgent`::

    with run_agent() as peer:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        ...
        assert peer.requests_for(remote_task_id) <= 3

The A2A face (``peer.url``) is the SDK's own HTTP+JSON binding (``create_rest_routes`` +
``DefaultRequestHandler`` + an :class:`~a2a.server.agent_execution.AgentExecutor`). What the
agent does is chosen per task by ``input["behaviour"]`` (the ``data`` part of the message,
or a JSON object in its first text part):

==============  =====================================================================
``complete``    (default) completes at once with ``input["output"]`` or
                ``{"verdict": "pass"}`` as a data artifact
``invalid``     completes with ``{"verdict": "maybe"}`` (fails the test output schema)
``ask``         asks a question (INPUT_REQUIRED); on the reply completes with
                ``{"verdict": "pass", "answer": <reply data or text>}``
``auth``        like ``ask`` but AUTH_REQUIRED
``fail``        FAILED with a status message
``reject``      REJECTED with a status message
``slow``        WORKING for ``input["seconds"]`` (default 2), then completes
``working``     stays WORKING until canceled (for cancel and timeout tests)
``held``        WORKING until the test calls ``peer.release()`` (or ``input["seconds"]``,
                default 60, pass), then completes: a stream that outlasts a restart
                without the test waiting out a fixed time
``slowsend``    waits ``input["seconds"]`` before answering the send, then behaves as
                ``input["then"]`` (default ``complete``)
``message``     answers with a bare Message whose data part is the output
``said``        WORKING with a status message whose data part is the output, then
                COMPLETED with no message and no artifact: the output is the task's
                last agent message (its history), as LangGraph's server keeps it
``chunks``      WORKING, then ``input["chunks"]`` (default 10) text chunks of
                ``input["size"]`` characters (default 1000) appended to one artifact
                (``chunked``), then completes like ``complete``
``written``     WORKING, then the output as JSON in a Markdown code block, as a language
                model writes it, in chunks of ``input["size"]`` characters (default 7)
                appended to one artifact (``answer``), then COMPLETED
``crash``       the executor raises (the SDK reports a failed task)
==============  =====================================================================

Non-A2A behaviours are reached through a path prefix, ``peer.url_for(mode)``, which serves
every A2A path (``/message:send``, ``/tasks/{id}``, ``/tasks/{id}:cancel``) as:

==============  =====================================================================
``500``         HTTP 500 with a JSON error body
``html``        HTTP 200 with an HTML page
``garbage``     HTTP 200 with ``application/json`` that is not JSON
``wrongshape``  HTTP 200 with JSON that is neither a Task nor a Message
``hang``        never answers (until the server stops)
``huge``        HTTP 200 with a 2 MB JSON body (its ``Content-Length`` says so)
``endless``     HTTP 200 with a chunked body that goes on for 200 MB
``legacy``      an 0.3-style agent: lowercase states, ``kind`` fields, unknown fields;
                send answers ``submitted``, the first poll ``completed``
``flaky``       the first request of each path answers 503, then the real A2A agent
``busy``        the first request of each path answers 429 with ``Retry-After: 1``,
                then the real A2A agent
``nolist``      the real A2A agent, but ``GET /tasks`` (ListTasks) answers 404
``badlist``     the real A2A agent, but ``GET /tasks`` answers a list of non-Tasks
``busylist``    the real A2A agent, but ``GET /tasks`` answers 503 (``Retry-After: 7``)
==============  =====================================================================

``GET /_stats`` answers the request counts as JSON (for a benchmark in another process).
These modes live in :mod:`tests.support.raw_modes`; the behaviours in
:mod:`tests.support.behaviours`; serving (ports, uvicorn in a thread, ``down_url()`` for a
closed port) in :mod:`tests.support.serving`.

Every request is counted by path (``peer.counts``, ``peer.total``, ``peer.sends``);
``peer.requests_for(id)`` counts the polls and cancels that name one remote task id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from tests.support.behaviours import VALID_OUTPUT, BehaviourExecutor
from tests.support.raw_modes import HoldsSends, RawModes
from tests.support.serving import free_port, serve_agent

# The SDK's telemetry wrappers complain when agent work is cut off at shutdown.
logging.getLogger("opentelemetry.context").setLevel(logging.CRITICAL)


@dataclass
class TestAgent:
    """A running test agent: its URLs, what it received and how often it was called."""

    __test__ = False  # not a pytest test class

    host: str = "127.0.0.1"
    port: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, list[Any]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    canceled: list[str] = field(default_factory=list)
    trace_headers: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by :meth:`release`: the ``held`` behaviour's tasks complete.
    released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def url(self) -> str:
        """The base URL of the A2A HTTP+JSON interface (an agent's ``a2aEndpoint``)."""
        return f"http://{self.host}:{self.port}"

    def url_for(self, mode: str) -> str:
        """The base URL of a non-A2A behaviour (see the module docstring)."""
        return f"{self.url}/x/{mode}"

    def count(self, path: str) -> None:
        with self._lock:
            self.counts[path] += 1

    def record_headers(self, path: str, raw: list[tuple[bytes, bytes]]) -> None:
        """Keep the trace headers of each request (``traceparent``, ``tracestate``)."""
        wanted = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
        traced = {k: v for k, v in wanted.items() if k in ("traceparent", "tracestate")}
        with self._lock:
            self.trace_headers.append((path, traced))

    @property
    def total(self) -> int:
        """All HTTP requests received (agent card fetches included)."""
        with self._lock:
            return sum(self.counts.values())

    @property
    def sends(self) -> int:
        """``message:send`` requests received (on every mode's path)."""
        with self._lock:
            return sum(n for path, n in self.counts.items() if path.endswith("/message:send"))

    def requests_for(self, remote_task_id: str) -> int:
        """Requests naming ``remote_task_id`` in their path (polls, cancels)."""
        with self._lock:
            return sum(n for path, n in self.counts.items() if remote_task_id in path)

    def release(self) -> None:
        """Let every task of the ``held`` behaviour complete (now and from now on)."""
        self.released.set()

    def reset(self) -> None:
        """Forget requests and what was received (between tests sharing one agent)."""
        with self._lock:
            self.counts.clear()
            self.trace_headers.clear()
            self.messages.clear()
            self.inputs.clear()
            self.replies.clear()
            self.canceled.clear()
            self.released.clear()


def agent_card(url: str) -> pb.AgentCard:
    """The test agent's card (HTTP+JSON binding, one skill)."""
    return pb.AgentCard(
        name="Test agent",
        description="A configurable A2A peer for the platform's tests.",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json"],
        skills=[
            pb.AgentSkill(
                id="ce-review",
                name="CE review",
                description="Reviews a product for CE marking.",
                tags=["compliance"],
            )
        ],
    )


def build_holding_app(agent: TestAgent) -> ASGIApp:
    """:func:`build_app` holding every ``message:send`` until the task ends or asks, as
    LangGraph's server does whatever the request's ``returnImmediately`` says (streams
    are served as usual)."""
    return HoldsSends(build_app(agent))


def build_app(agent: TestAgent) -> ASGIApp:
    """The Starlette app: the SDK's A2A routes behind the raw-mode middleware."""
    card = agent_card(agent.url)
    handler = DefaultRequestHandler(
        agent_executor=BehaviourExecutor(agent),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [
        Route("/health", lambda request: JSONResponse({"ok": True})),
        *create_agent_card_routes(card),
        *create_rest_routes(handler),
    ]
    return RawModes(Starlette(routes=routes), agent, output=VALID_OUTPUT)


@contextlib.contextmanager
def run_agent(
    port: int | None = None, build: Callable[[TestAgent], ASGIApp] | None = None
) -> Iterator[TestAgent]:
    """Serve a :class:`TestAgent` in a background thread; stopped on exit. ``build`` makes
    the app (default :func:`build_app`; :mod:`tests.support.peers` has other bindings)."""
    agent = TestAgent(port=port or free_port())
    with serve_agent(agent, (build or build_app)(agent)):
        yield agent


def main() -> None:
    """``python -m tests.support.agents [PORT]``: serve the test agent in the foreground."""
    import sys

    with run_agent(int(sys.argv[1]) if len(sys.argv) > 1 else None) as agent:
        print(f"test agent on {agent.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
