"""An agent built with Google's Agent Development Kit (``google-adk``), served as ADK
serves any agent over A2A (``google.adk.a2a.utils.agent_to_a2a.to_a2a``: ADK's own
executor on a2a-sdk's JSON-RPC server, its card built from the agent), in its own cached
environment (``.peers/adk/``, :func:`tests.support.venvs.cached_venv`).

An ``LlmAgent`` with a long-running tool, as ADK's human-in-the-loop agents are built,
whose model is scripted (no language model): it answers by the message's data part, as
the other test agents do (ADK hands a data part to the model as a tagged JSON blob):
``complete`` (``{"verdict": "pass"}`` as text, which ADK's executor turns into the task's
artifact), ``slow`` (the same after ``seconds``), ``ask`` (calls the long-running tool
``ask_person``, which ADK reports as ``input-required``; the answer is the call's function
response, which ADK puts in place of the tool's "pending" result, or else text the model
reads, marked ``(as text)``) and ``fail`` (the model raises: ADK fails the task with the
error's text).

Run as ``python -m tests.support.adk_agent PORT``; :func:`run_adk_agent` does, in a child
process with the peer's environment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.venvs import PeerServer, peer_python, run_peer_module, serve

REQUIREMENTS = ("google-adk[a2a]==2.13.0", "a2a-sdk==1.3.0", "uvicorn==0.55.0")
TAG = (b"<a2a_datapart_json>", b"</a2a_datapart_json>")


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object ``text`` is, else {} (a model reads JSON text as it comes)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _conversation(contents: list[Any]) -> tuple[dict[str, Any], Any, str]:
    """What the model is given, read back: the task's data (the first message's data
    part, which ADK passes as a tagged blob, or its JSON text), the latest tool result,
    and the latest user text after the task's message (an answer sent as text)."""
    data: dict[str, Any] = {}
    result: Any = None
    text = ""
    for content in contents:
        for part in content.parts or []:
            blob = part.inline_data
            if blob is not None and blob.data and blob.data.startswith(TAG[0]) and not data:
                data = json.loads(blob.data[len(TAG[0]) : -len(TAG[1])])
            elif part.text and content.role == "user" and not data and _json_object(part.text):
                data = _json_object(part.text)  # sent as JSON text (a text-only card)
            elif part.function_response is not None:
                result = part.function_response.response or {}
            elif part.text and content.role == "user" and data:
                text = part.text
    return data, result, text


def build_app(port: int) -> Any:
    """The Starlette app ``to_a2a`` makes of an ``LlmAgent`` whose model is scripted.
    (ADK is imported here: the tests import this module, for :func:`run_adk_agent`, where
    ADK is not installed.)"""
    from google.adk.a2a.utils.agent_to_a2a import to_a2a
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.tools.long_running_tool import LongRunningFunctionTool
    from google.genai import types

    def ask_person(question: str) -> dict[str, str]:
        """Ask a person; the answer comes later, as this call's response."""
        return {"status": "pending"}

    def said(**content: Any) -> LlmResponse:
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(**content)]))

    class Scripted(BaseLlm):
        """Answers as the task's ``behaviour`` says (see the module docstring)."""

        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            data, result, text = _conversation(llm_request.contents)
            behaviour = data.get("behaviour", "complete")
            if behaviour == "fail":
                raise RuntimeError("the agent's code failed")
            if behaviour == "ask" and result is None and not text:
                question = {"question": "Which market: EU or UK?"}
                yield said(function_call=types.FunctionCall(name="ask_person", args=question))
                return
            if behaviour == "ask" and (result or {}).get("status") == "pending" and not text:
                yield said(text="I asked a person; waiting for the answer.")
                return
            if behaviour == "slow":
                await asyncio.sleep(float(data.get("seconds", 1)))
            answer: dict[str, Any] = {"verdict": "pass"}
            if behaviour == "ask":  # the tool's result, or text the model was sent
                answer["answer"] = (result or {}).get("answer") or f"{text.strip()} (as text)"
            yield said(text=json.dumps(answer))

    agent = LlmAgent(
        name="reviewer",
        description="Reviews a product against the rules.",
        model=Scripted(),
        instruction="Review the product.",
        tools=[LongRunningFunctionTool(ask_person)],
    )
    return to_a2a(agent, host="127.0.0.1", port=port)


def adk_python() -> Path:
    """The Python of ADK's environment (``.peers/adk``, built on first use)."""
    return peer_python("adk", REQUIREMENTS)


@contextmanager
def run_adk_agent() -> Iterator[PeerServer]:
    """The agent on a free loopback port, in ``.peers/adk``."""
    with run_peer_module(
        "adk", REQUIREMENTS, "tests.support.adk_agent", {"ADK_DISABLE_TELEMETRY": "1"}
    ) as peer:
        yield peer


if __name__ == "__main__":
    serve(build_app)
