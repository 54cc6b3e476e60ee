"""Agents hosted with Microsoft Agent Framework's ``A2AExecutor`` (``agent-framework-a2a``
on a2a-sdk 1.x's JSON-RPC server, as the framework's hosting guide builds them), in the
framework's environment (``.peers/maf``, :mod:`tests.support.maf_client`).

Two agents in one process, each with its own card naming text input and output, as the
framework's example card does: ``/plain/`` runs the executor as it comes (the agent's
answer is the message of a ``working`` status, then the task completes with no
artifact), ``/stream/`` with ``stream=True`` (the answer streamed in chunks appended to
one artifact).

No language model: a scripted agent reads the task's JSON text (the executor hands the
agent the message's text alone) and answers as a model would, with the result as text:
``complete`` answers ``{"verdict": "pass"}``; ``slow`` does so after ``seconds``; ``fail``
raises (the executor fails the task with the error's text). The framework's executor has
no questions (``input-required``).

Run as ``python -m tests.support.maf_agent PORT``; :func:`run_maf_agent` does, in a child
process with the framework's environment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.maf_client import REQUIREMENTS
from tests.support.venvs import PeerServer, run_peer_module, serve

# What a model would write for each behaviour, and how long it thinks first.


def _answer(query: str) -> tuple[str, float]:
    try:
        data = json.loads(query)
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    behaviour = data.get("behaviour", "complete")
    if behaviour == "fail":
        raise RuntimeError("The model could not review this product.")
    seconds = float(data.get("seconds", 1)) if behaviour == "slow" else 0.0
    return json.dumps({"verdict": "pass"}), seconds


def build_app(port: int) -> Any:
    """The Starlette app serving both agents. (The framework is imported here: the tests
    import this module, where the framework is not installed.)"""
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from agent_framework import (
        AgentResponse,
        AgentResponseUpdate,
        BaseAgent,
        Content,
        Message,
        ResponseStream,
    )
    from agent_framework.a2a import A2AExecutor
    from starlette.applications import Starlette
    from starlette.routing import Mount

    class Scripted(BaseAgent):
        """Answers by the task's ``behaviour`` (see the module docstring)."""

        def run(self, messages: Any = None, *, stream: bool = False, **kwargs: Any) -> Any:
            query = messages if isinstance(messages, str) else str(messages)
            if stream:
                return ResponseStream(self._chunks(query), finalizer=AgentResponse.from_updates)
            return self._whole(query)

        async def _whole(self, query: str) -> Any:
            text, seconds = _answer(query)
            await asyncio.sleep(seconds)
            return AgentResponse(messages=[Message(role="assistant", contents=[text])])

        async def _chunks(self, query: str) -> AsyncIterator[Any]:
            text, seconds = _answer(query)
            await asyncio.sleep(seconds)
            for i in range(0, len(text), 6):  # token by token, as a model streams
                piece = Content.from_text(text=text[i : i + 6])
                yield AgentResponseUpdate(contents=[piece], role="assistant")

    def mounted(path: str, stream: bool) -> Mount:
        url = f"http://127.0.0.1:{port}/{path}/"
        card = AgentCard(
            name=f"Reviewer ({path})",
            description="Reviews a product against the rules.",
            version="1.0.0",
            default_input_modes=["text"],
            default_output_modes=["text"],
            capabilities=AgentCapabilities(streaming=True),
            supported_interfaces=[
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            skills=[AgentSkill(id="ce-review", name="CE review", description="Reviews.")],
        )
        handler = DefaultRequestHandler(
            agent_executor=A2AExecutor(Scripted(name="reviewer"), stream=stream),
            task_store=InMemoryTaskStore(),
            agent_card=card,
        )
        app = Starlette(
            routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
        )
        return Mount(f"/{path}", app=app)

    return Starlette(routes=[mounted("plain", False), mounted("stream", True)])


@contextmanager
def run_maf_agent() -> Iterator[PeerServer]:
    """Both agents on a free loopback port, in ``.peers/maf``; the base URL (the agents
    are under ``/plain/`` and ``/stream/``)."""
    with run_peer_module("maf", REQUIREMENTS, "tests.support.maf_agent", {}) as peer:
        yield peer


if __name__ == "__main__":
    serve(build_app)
