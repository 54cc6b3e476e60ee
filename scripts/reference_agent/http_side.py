"""The HTTP side: A2A 1.0 HTTP+JSON served by the official a2a-sdk around the skill handler.

The SDK does the protocol (routes, task store, states, errors); this module only adapts
:func:`~reference_agent.skill.handle_task` to its ``AgentExecutor`` interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    Task,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from reference_agent.config import Config, ConfigError
from reference_agent.messages import answer_of, artifacts_of, input_of, text_message, to_json
from reference_agent.skill import Job, handle_task

if TYPE_CHECKING:
    from reference_agent.agent import ReferenceAgent


class SkillExecutor(AgentExecutor):
    """Runs :func:`handle_task` for each message the SDK's request handler receives."""

    def __init__(self, skill: dict[str, Any]) -> None:
        self.skill = skill
        self.jobs: dict[str, Job] = {}  # by A2A task id
        self.started: dict[str, str] = {}  # the task each first message started, by its id

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK's request handler always fills these in before calling us.
        assert context.message is not None
        task_id, context_id = context.task_id or "", context.context_id or ""
        message = to_json(context.message)
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:  # a new task: the SDK wants the Task first
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
            self.jobs[task_id] = Job(input=input_of(message))
            self.started[context.message.message_id] = task_id
        else:  # a follow-up: the answer to our question
            self.jobs.setdefault(task_id, Job(input={})).answers.append(answer_of(message))
        skill_id = (message.get("metadata") or {}).get("skillId")
        if skill_id and skill_id != self.skill["id"]:
            text = f"This agent offers {self.skill['id']}, not {skill_id}."
            await updater.reject(text_message(text, task_id, context_id))
            return
        await updater.start_work()
        outcome = await handle_task(self.skill, self.jobs[task_id])
        for artifact in artifacts_of(outcome):
            await updater.add_artifact(list(artifact.parts), artifact.artifact_id, artifact.name)
        await updater.update_status(outcome.state, text_message(outcome.text, task_id, context_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        await TaskUpdater(event_queue, task_id, context_id).cancel()


class IdempotentRequestHandler(DefaultRequestHandler):
    """The SDK's handler, plus: a message sent twice (same ``messageId``) is handled once.

    The platform re-sends a message with the same id when it is not sure the first send
    arrived; the repeat gets the task the first send created, and nothing runs twice.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # messageId -> the task it started (a future while the first send is running)
        self._sends: dict[str, asyncio.Future[str | None]] = {}

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        key = f"{params.message.task_id}/{params.message.message_id}"
        first = self._sends.get(key)
        if first is not None and params.message.message_id:
            task_id = await asyncio.shield(first)
            if task_id:
                return await self.on_get_task(GetTaskRequest(id=task_id), context)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._sends[key] = future
        try:
            result = await super().on_message_send(params, context)
        except BaseException:
            self._sends.pop(key, None)
            future.set_result(None)
            raise
        future.set_result(result.id if isinstance(result, Task) else None)
        return result

    def started_task(self, message_id: str) -> str | None:
        """The task a first message with this id started here, as soon as it runs (a
        blocking send answers only when it ends)."""
        executor = self.agent_executor
        return executor.started.get(message_id) if isinstance(executor, SkillExecutor) else None

    def send_of(self, message_id: str) -> asyncio.Future[str | None] | None:
        """The send of a first message (no ``taskId``) with this id here: it answers the
        task it started (None if it failed); None if no such message came."""
        return self._sends.get(f"/{message_id}")


def agent_card(config: Config, skill: dict[str, Any]) -> AgentCard:
    url = config.public_url or f"http://{config.a2a_host}:{config.a2a_port}"
    return AgentCard(
        name=config.agent_name,
        description=f"Reference agent offering {skill['id']} ({skill.get('name', '')}).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=[
            AgentSkill(
                id=skill["id"],
                name=skill.get("name") or skill["id"],
                description=skill.get("description") or skill["id"],
                tags=skill.get("tags") or [],
                examples=skill.get("examples") or [],
            )
        ],
    )


def build_http_app(agent: ReferenceAgent) -> Starlette:
    """The SDK's A2A routes and agent card, plus ``GET /health``."""
    card = agent_card(agent.config, agent.skill)
    executor = SkillExecutor(agent.skill)
    handler = IdempotentRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(agent.health())

    routes = [Route("/health", health, methods=["GET"])]
    routes += create_agent_card_routes(card)
    routes += create_rest_routes(handler)
    app = Starlette(routes=routes)
    app.state.executor = executor
    app.state.handler = handler  # the WebSocket side follows this side's tasks
    return app


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the agent owns SIGINT/SIGTERM/SIGUSR1."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind_port(host: str, port: int) -> socket.socket:
    """Bind the HTTP port now, so "port in use" is a clear start-up error."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is already in use: set A2A_PORT") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock
