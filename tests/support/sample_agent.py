"""An agent in the shape of a2a-sdk's samples (helloworld and most of a2a-samples), for tests.

Its card declares text input only (``defaultInputModes: ["text"]``), its executor reads
the request with ``context.get_user_input()`` (the text parts, joined: a data part is
nothing to it), reports nothing while it works (``seconds``), then answers a bare text
Message, and serves JSON-RPC, as those samples do. a2a-sdk holds a send asking to
return at once (``returnImmediately``) until that first event: such an agent holds its
sends.
What it read is kept (``agent.inputs``). It answers in JSON when it reads JSON, a
verdict on the product; anything else, a sentence saying what it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from tests.support.serving import free_port, serve_agent


@dataclass
class SampleAgent:
    port: int
    host: str = "127.0.0.1"
    inputs: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long it thinks before it answers (a model's time)
    streaming: bool = True  # what its card says
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"


class ReadsText(AgentExecutor):
    def __init__(self, agent: SampleAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        query = context.get_user_input()
        self.agent.inputs.append(query)
        await asyncio.sleep(self.agent.seconds)  # reporting nothing meanwhile, as samples do
        try:
            asked = json.loads(query)
        except ValueError:
            answer = f"I got no JSON, only {query!r}."
        else:
            product = asked.get("product") if isinstance(asked, dict) else None
            answer = json.dumps({"verdict": "pass", "product": product})
        await event_queue.enqueue_event(new_text_message(answer))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def card(url: str, streaming: bool = True) -> pb.AgentCard:
    return pb.AgentCard(
        name="Sample agent",
        description="Reads text, as a2a-sdk's samples do.",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=streaming),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[
            pb.AgentSkill(id="ce-review", name="CE review", description="Reviews.", tags=["x"])
        ],
    )


@contextlib.contextmanager
def run_sample_agent(seconds: float = 0.0, streaming: bool = True) -> Iterator[SampleAgent]:
    """Serve a :class:`SampleAgent` in a background thread; stopped on exit."""
    agent = SampleAgent(port=free_port(), seconds=seconds, streaming=streaming)
    served = card(agent.url, streaming)
    handler = DefaultRequestHandler(
        agent_executor=ReadsText(agent), task_store=InMemoryTaskStore(), agent_card=served
    )
    app = Starlette(
        routes=[*create_agent_card_routes(served), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    with serve_agent(agent, app):
        yield agent
