"""A real A2A 0.3 agent (a2a-sdk 0.3.26, JSON-RPC), for dispatch tests: run with the 0.3
environment's Python (``tests.support.legacy_sdk.legacy_python()``) as
``python legacy_agent.py PORT [--rest] [--push]``; prints ``ready`` when it serves.
``--rest`` serves the HTTP+JSON binding instead (the SDK's FastAPI app, ``/v1/...``);
``--push`` offers push notifications, sent by the SDK's own sender.

It does what ``input["behaviour"]`` (the message's data part) says, like the 1.0 test
agent: ``complete`` (default), ``slow`` (working for ``input["seconds"]``), ``ask``
(input-required; the reply completes with ``{"verdict": "pass", "answer": ...}``),
``fail``, ``message`` (a bare Message answer) and ``working`` (until canceled).
Its card is the SDK's 0.3 card: ``url`` + ``preferredTransport`` (``JSONRPC`` or
``HTTP+JSON``).
"""

import asyncio
import sys
import uuid

import httpx
import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)

VALID = {"verdict": "pass"}


def data_of(message):
    for part in (message.parts if message else []) or []:
        if isinstance(part.root, DataPart):
            return part.root.data
    return {}


def text_of(message):
    texts = [
        p.root.text for p in (message.parts if message else []) if isinstance(p.root, TextPart)
    ]
    return " ".join(texts)


class Behaviours(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        updater = TaskUpdater(event_queue, task_id, context_id)
        current = context.current_task
        if current is not None and current.status.state == TaskState.input_required:
            answer = data_of(context.message) or text_of(context.message)
            await updater.add_artifact([Part(root=DataPart(data={**VALID, "answer": answer}))])
            await updater.complete()
            return
        data = data_of(context.message)
        behaviour = data.get("behaviour", "complete")
        if behaviour == "message":
            await event_queue.enqueue_event(
                Message(
                    message_id=str(uuid.uuid4()),
                    role=Role.agent,
                    context_id=context_id,
                    parts=[Part(root=DataPart(data=VALID))],
                )
            )
            return
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.submitted),
                history=[context.message] if context.message else [],
            )
        )
        if behaviour == "complete":
            await updater.add_artifact([Part(root=DataPart(data=VALID))])
            await updater.complete()
        elif behaviour == "slow":
            await updater.start_work()
            await asyncio.sleep(float(data.get("seconds", 1)))
            await updater.add_artifact([Part(root=DataPart(data=VALID))])
            await updater.complete()
        elif behaviour == "ask":
            await updater.requires_input(
                updater.new_agent_message([Part(root=TextPart(text="Which market: EU or UK?"))])
            )
        elif behaviour == "fail":
            await updater.failed(
                updater.new_agent_message([Part(root=TextPart(text="The agent broke."))])
            )
        elif behaviour == "working":
            await updater.start_work()
            await asyncio.sleep(3600)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def main() -> None:
    port = int(sys.argv[1])
    rest, push = "--rest" in sys.argv, "--push" in sys.argv
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="Legacy 0.3 agent",
        description="An a2a-sdk 0.3 agent.",
        url=url,
        version="0.3.26",
        preferred_transport="HTTP+JSON" if rest else "JSONRPC",
        capabilities=AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="ce-review", name="CE review", description="x", tags=["x"])],
    )
    configs = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=Behaviours(),
        task_store=InMemoryTaskStore(),
        push_config_store=configs if push else None,
        push_sender=BasePushNotificationSender(httpx.AsyncClient(), configs) if push else None,
    )
    if rest:
        app = A2ARESTFastAPIApplication(agent_card=card, http_handler=handler).build()
    else:
        app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    print("ready", flush=True)
    server.run()


if __name__ == "__main__":
    main()
