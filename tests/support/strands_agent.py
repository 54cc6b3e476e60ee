"""An agent built with AWS's Strands Agents (``strands-agents[a2a]``), served by its own
``A2AServer`` (a2a-sdk 0.3's JSON-RPC server with Strands' executor, A2A-compliant
streaming on), in its own cached environment (``.peers/strands/``,
:func:`tests.support.venvs.cached_venv`).

No language model: a scripted :class:`Model` reads the message (Strands hands a data part
to the model as ``[Structured Data]`` text) and answers as a model would: ``complete``
writes ``{"verdict": "pass"}`` as text, which Strands streams in chunks appended to one
artifact; ``slow`` does so after ``seconds``; ``ask`` calls a tool that raises a Strands
*interrupt* (A2A ``input-required``, its ids in a data part ``{"interrupts": [...]}``),
which only an ``interruptResponse`` naming its id resumes, the answer becoming the tool's
result; ``fail`` raises in the model (Strands fails the task).

Run as ``python -m tests.support.strands_agent PORT``; :func:`run_strands_agent` does, in
a child process with the peer's environment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.venvs import PeerServer, peer_python, run_peer_module, serve

REQUIREMENTS = ("strands-agents[a2a]==1.62.0", "a2a-sdk==0.3.26", "uvicorn==0.55.0")


def _request(messages: list[Any]) -> tuple[dict[str, Any], Any]:
    """The task's data (the first user message's structured part, or its JSON text) and
    the latest tool result in the conversation, if the tool ran."""
    data: dict[str, Any] = {}
    result = None
    for message in messages:
        for block in message.get("content", []):
            text = block.get("text") or ""
            if message["role"] == "user" and text.startswith("[Structured Data]") and not data:
                data = json.loads(text.split("\n", 1)[1])
            elif message["role"] == "user" and not data and text.startswith("{"):
                data = json.loads(text)  # sent as JSON text (its card names text input)
            if "toolResult" in block:
                result = block["toolResult"]["content"][0].get("text")
    return data, result


def build_app(port: int) -> Any:
    """The Starlette app of Strands' ``A2AServer`` for the scripted agent. (Strands is
    imported here: the tests import this module, where Strands is not installed.)"""
    from strands import Agent, tool
    from strands.models.model import Model
    from strands.multiagent.a2a import A2AServer

    @tool(context=True)
    def ask_person(question: str, tool_context: Any) -> str:
        """Ask a person a question and wait for the answer."""
        return str(tool_context.interrupt("market", reason=question))

    class Scripted(Model):
        """Answers by the task's ``behaviour`` (see the module docstring)."""

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            data, answer = _request(messages)
            behaviour = data.get("behaviour", "complete")
            yield {"messageStart": {"role": "assistant"}}
            if behaviour == "fail":
                raise RuntimeError("the model failed")
            if behaviour == "ask" and answer is None:
                use = {"toolUseId": "ask-1", "name": "ask_person"}
                yield {"contentBlockStart": {"start": {"toolUse": use}}}
                question = json.dumps({"question": "Which market: EU or UK?"})
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": question}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
                return
            if behaviour == "slow":
                await asyncio.sleep(float(data.get("seconds", 1)))
            result: dict[str, Any] = {"verdict": "pass"}
            if answer is not None:
                result["answer"] = answer
            text = json.dumps(result)
            for i in range(0, len(text), 6):  # token by token, as a model streams
                yield {"contentBlockDelta": {"delta": {"text": text[i : i + 6]}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}

    def agent(context_id: str) -> Any:
        """A fresh agent per A2A context, as Strands keeps a conversation per context."""
        return Agent(
            name="reviewer",
            description="Reviews a product against the rules.",
            model=Scripted(),
            tools=[ask_person],
            callback_handler=None,
        )

    server = A2AServer(
        agent_factory=agent, host="127.0.0.1", port=port, enable_a2a_compliant_streaming=True
    )
    return server.to_starlette_app()


def strands_python() -> Path:
    """The Python of Strands' environment (``.peers/strands``, built on first use)."""
    return peer_python("strands", REQUIREMENTS)


@contextmanager
def run_strands_agent() -> Iterator[PeerServer]:
    """The agent on a free loopback port, in ``.peers/strands``."""
    with run_peer_module(
        "strands", REQUIREMENTS, "tests.support.strands_agent", {"OTEL_SDK_DISABLED": "true"}
    ) as peer:
        yield peer


if __name__ == "__main__":
    serve(build_app)
