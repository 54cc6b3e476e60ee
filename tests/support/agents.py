"""A real A2A 1.0 peer for tests and benchmarks, built with the official ``a2a-sdk``.

:func:`run_agent` starts one Starlette app under uvicorn on a free ``127.0.0.1`` port in a
background thread and yields a :class:`TestAgent`::

    with run_agent() as peer:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        ...
        assert peer.requests_for(remote_task_id) <= 3

The A2A face (``peer.url``) is the SDK's own HTTP+JSON binding (``create_rest_routes`` +
``DefaultRequestHandler`` + an :class:`~a2a.server.agent_execution.AgentExecutor`). What the
agent does is chosen per task by ``input["behaviour"]`` (the ``data`` part of the message):

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
These modes live in :mod:`tests.support.raw_modes`; serving (ports, uvicorn in a thread,
``down_url()`` for a closed port) in :mod:`tests.support.serving`.

Every request is counted by path (``peer.counts``, ``peer.total``, ``peer.sends``);
``peer.requests_for(id)`` counts the polls and cancels that name one remote task id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import get_data_parts, get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from tests.support.raw_modes import HoldsSends, RawModes
from tests.support.serving import free_port, serve_agent

# The SDK's telemetry wrappers complain when agent work is cut off at shutdown.
logging.getLogger("opentelemetry.context").setLevel(logging.CRITICAL)

VALID_OUTPUT: dict[str, Any] = {"verdict": "pass"}
INVALID_OUTPUT: dict[str, Any] = {"verdict": "maybe"}


def _data_part(data: dict[str, Any]) -> pb.Part:
    part = pb.Part()
    part.data.struct_value.update(data)
    return part


def _text_part(text: str) -> pb.Part:
    return pb.Part(text=text)


def _input_of(message: pb.Message | None) -> dict[str, Any]:
    """The first dict data part of a message (the platform's skill input), else a JSON
    object in its first text part (clients that send text alone)."""
    if message is None:
        return {}
    for data in get_data_parts(list(message.parts)):
        if isinstance(data, dict):
            return data
    for part in message.parts:
        if part.HasField("text"):
            try:
                data = json.loads(part.text)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


class BehaviourExecutor(AgentExecutor):
    """Does what ``input["behaviour"]`` says (see the module docstring)."""

    def __init__(self, agent: TestAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task = context.current_task
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        updater = TaskUpdater(event_queue, task_id, context_id)
        if task is not None and task.status.state in (
            pb.TaskState.TASK_STATE_INPUT_REQUIRED,
            pb.TaskState.TASK_STATE_AUTH_REQUIRED,
        ):
            # A reply to our question: finish with what the person said.
            first = self.agent.inputs.get(task_id, {})
            reply = _input_of(message) or get_message_text(message) if message else ""
            self.agent.replies.setdefault(task_id, []).append(message)
            output = {**first.get("output", VALID_OUTPUT), "answer": reply}
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
            return
        data = _input_of(message)
        self.agent.inputs[task_id] = data
        if message is not None:
            self.agent.messages.append(MessageToDict(message))
        behaviour = str(data.get("behaviour", "complete"))
        await self._run(behaviour, data, task_id, context_id, message, updater, event_queue)

    async def _run(
        self,
        behaviour: str,
        data: dict[str, Any],
        task_id: str,
        context_id: str,
        message: pb.Message | None,
        updater: TaskUpdater,
        event_queue: EventQueue,
    ) -> None:
        output = data.get("output", VALID_OUTPUT)
        if behaviour == "message":
            reply = pb.Message(
                message_id=str(uuid.uuid4()),
                role=pb.Role.ROLE_AGENT,
                context_id=context_id,
                parts=[_data_part(output)],
            )
            await event_queue.enqueue_event(reply)
            return
        if behaviour == "slowsend":
            # Hold the send's HTTP request open (a worker killed now dies mid-send).
            await asyncio.sleep(float(data.get("seconds", 2)))
            behaviour = str(data.get("then", "complete"))
        if behaviour == "complete":
            # The whole answer as the first event: with returnImmediately the send's
            # response is already the finished task (one request per task).
            done = pb.Task(
                id=task_id,
                context_id=context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_COMPLETED),
                artifacts=[pb.Artifact(artifact_id="result", parts=[_data_part(output)])],
                history=[message] if message is not None else [],
            )
            await event_queue.enqueue_event(done)
            return
        await event_queue.enqueue_event(
            pb.Task(
                id=task_id,
                context_id=context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
                history=[message] if message is not None else [],
            )
        )
        if behaviour == "invalid":
            await updater.add_artifact([_data_part(INVALID_OUTPUT)], name="result")
            await updater.complete()
        elif behaviour in ("ask", "auth"):
            question = updater.new_agent_message([_text_part("Which market: EU or UK?")])
            if behaviour == "ask":
                await updater.requires_input(question)
            else:
                await updater.requires_auth(question)
        elif behaviour == "fail":
            await updater.failed(updater.new_agent_message([_text_part("The agent broke.")]))
        elif behaviour == "reject":
            await updater.reject(updater.new_agent_message([_text_part("Not my kind of work.")]))
        elif behaviour == "slow":
            await updater.start_work()
            await asyncio.sleep(float(data.get("seconds", 2)))
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
        elif behaviour == "chunks":
            await updater.start_work()
            count, size = int(data.get("chunks", 10)), int(data.get("size", 1000))
            for i in range(count):
                await updater.add_artifact(
                    [_text_part(str(i % 10) * size)],
                    artifact_id="chunked",
                    append=i > 0,
                    last_chunk=i == count - 1,
                )
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
        elif behaviour == "written":
            # As a language model answers: the result as JSON in a Markdown code block,
            # streamed in small chunks appended to one artifact.
            await updater.start_work()
            text = f"```json\n{json.dumps(output)}\n```"
            size = int(data.get("size", 7))
            pieces = [text[i : i + size] for i in range(0, len(text), size)]
            for i, piece in enumerate(pieces):
                await updater.add_artifact(
                    [_text_part(piece)],
                    artifact_id="answer",
                    append=i > 0,
                    last_chunk=i == len(pieces) - 1,
                )
            await updater.complete()
        elif behaviour == "said":
            said = updater.new_agent_message([_data_part(output)])
            await updater.start_work(message=said)
            await updater.complete()
        elif behaviour == "working":
            await updater.start_work()
            await asyncio.sleep(3600)
        elif behaviour == "crash":
            raise RuntimeError("the test agent crashed on purpose")
        else:
            await updater.failed(updater.new_agent_message([_text_part(f"unknown {behaviour}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.agent.canceled.append(context.task_id or "")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


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

    def reset(self) -> None:
        """Forget requests and what was received (between tests sharing one agent)."""
        with self._lock:
            self.counts.clear()
            self.trace_headers.clear()
            self.messages.clear()
            self.inputs.clear()
            self.replies.clear()
            self.canceled.clear()


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
