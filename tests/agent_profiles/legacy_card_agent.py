"""A real A2A 0.3 agent (a2a-sdk 0.3), for card-reading tests: run with the 0.3
environment's Python (``tests.support.legacy_sdk.legacy_python()``) as
``python legacy_card_agent.py PORT``; prints ``ready`` when it serves.

Its card is the SDK's 0.3 card: ``url`` + ``preferredTransport: JSONRPC`` (what it
serves), ``protocolVersion: 0.3.0`` and a bearer security scheme.
"""

import sys

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityScheme,
)
from a2a.utils import new_agent_text_message


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(new_agent_text_message("ok"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def main() -> None:
    port = int(sys.argv[1])
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="Legacy 0.3 agent",
        description="An a2a-sdk 0.3 agent.",
        url=url,
        version="0.3.26",
        preferred_transport="JSONRPC",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="ce-review", name="CE review", description="x", tags=["x"])],
        security_schemes={"bearer": SecurityScheme(root=HTTPAuthSecurityScheme(scheme="bearer"))},
        security=[{"bearer": []}],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    print("ready", flush=True)
    server.run()


if __name__ == "__main__":
    main()
