"""A real A2A 0.3 agent (a2a-sdk 0.3.26) that records what it parsed of each message, for
tests of what the platform's 0.3 transports send: run with the 0.3 environment's Python
(``tests.support.legacy_sdk.legacy_python()``) as
``python echo03_agent.py PORT jsonrpc|rest RECORD``; prints ``ready`` when it serves.

Every message it receives is appended to RECORD as one JSON line, as the SDK parsed it
(0.3 JSON: ``kind`` fields, ``file.name``, ...); it completes each task with an artifact
echoing the message's parts. ``rest`` serves the HTTP+JSON binding (the SDK's FastAPI app,
``/v1/...``, which parses the 0.3 proto strictly), ``jsonrpc`` the JSON-RPC one.
"""

import json
import sys
import uuid

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Artifact,
    Task,
    TaskState,
    TaskStatus,
)

PORT, BINDING, RECORD = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def record(seen: dict) -> None:
    """Append one parsed message to RECORD (a few bytes: no need to leave the loop)."""
    with open(RECORD, "a") as out:
        out.write(json.dumps(seen) + "\n")


class Echo(AgentExecutor):
    """Records the message, then completes with its parts as the artifact."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        message = context.message
        record(message.model_dump(mode="json", by_alias=True, exclude_none=True))
        await queue.enqueue_event(
            Task(
                id=context.task_id or str(uuid.uuid4()),
                context_id=context.context_id or str(uuid.uuid4()),
                status=TaskStatus(state=TaskState.completed),
                artifacts=[Artifact(artifact_id="echo", parts=message.parts)],
            )
        )

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        raise NotImplementedError


card = AgentCard(
    name="echo 0.3",
    description="Records what it receives.",
    url=f"http://127.0.0.1:{PORT}",
    version="0.3.26",
    preferred_transport="HTTP+JSON" if BINDING == "rest" else "JSONRPC",
    capabilities=AgentCapabilities(streaming=False),
    default_input_modes=["application/json", "text/plain"],
    default_output_modes=["application/json"],
    skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
)
handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore())
app_class = A2ARESTFastAPIApplication if BINDING == "rest" else A2AStarletteApplication
app = app_class(agent_card=card, http_handler=handler).build()
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=PORT, log_level="critical"))
print("ready", flush=True)
server.run()
