"""An agent built with Google's Agent Development Kit (``google-adk``), served as ADK
serves any agent over A2A (``google.adk.a2a.utils.agent_to_a2a.to_a2a``: ADK's own
executor on a2a-sdk's JSON-RPC server, its card built from the agent), in its own cached
environment (``.peers/adk/``, :func:`tests.support.venvs.cached_venv`).

No model: a :class:`BaseAgent` whose behaviour is chosen by the message's data part, as
the other test agents' are (ADK hands a data part to the agent as a tagged JSON blob):
``complete`` (answers ``{"verdict": "pass"}`` as text, which ADK's executor turns into the
task's artifact), ``slow`` (the same after ``seconds``), ``ask`` (a long-running tool call,
which ADK reports as ``input-required``; the answer is the function response's, or the
reply's text marked ``(as text)``) and ``fail`` (the agent raises: ADK fails the task with
the error's text).

Run as ``python -m tests.support.adk_agent PORT``; :func:`run_adk_agent` does, in a child
process with the peer's environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REQUIREMENTS = ("google-adk[a2a]==2.13.0", "a2a-sdk==1.3.0", "uvicorn==0.55.0")
TAG = (b"<a2a_datapart_json>", b"</a2a_datapart_json>")


def _data_of(content: Any) -> tuple[dict[str, Any], str]:
    """The message's data part (ADK passes it as a tagged blob) and the answer it
    carries: a function response's (what completes the pending call), else its text,
    marked as such (the call stays open; a model would read it all the same)."""
    data: dict[str, Any] = {}
    text = ""
    for part in (content.parts if content else None) or []:
        blob = part.inline_data
        if blob is not None and blob.data and blob.data.startswith(TAG[0]):
            data = json.loads(blob.data[len(TAG[0]) : -len(TAG[1])])
        elif part.function_response is not None:
            return data, str((part.function_response.response or {}).get("answer"))
        elif part.text:
            text += part.text
    return data, f"{text.strip()} (as text)"


def build_app(port: int) -> Any:
    """The Starlette app ``to_a2a`` makes of the behaviours agent. (ADK is imported here:
    the tests import this module, for :func:`run_adk_agent`, where ADK is not installed.)"""
    from google.adk.a2a.utils.agent_to_a2a import to_a2a
    from google.adk.agents import BaseAgent
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.events import Event
    from google.genai import types

    class Behaviours(BaseAgent):
        """Does what the message's ``behaviour`` says; a reply answers a question."""

        async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
            data, text = _data_of(ctx.user_content)
            behaviour = data.get("behaviour", "complete")
            if not data:  # a reply to the question
                result = {"verdict": "pass", "answer": text}
            elif behaviour == "fail":
                raise RuntimeError("the agent's code failed")
            elif behaviour == "ask":
                call = types.FunctionCall(
                    id=f"ask-{uuid.uuid4().hex[:8]}",
                    name="ask_person",
                    args={"question": "Which market: EU or UK?"},
                )
                yield Event(
                    author=self.name,
                    invocation_id=ctx.invocation_id,
                    content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                    long_running_tool_ids={call.id},
                )
                return
            else:
                if behaviour == "slow":
                    await asyncio.sleep(float(data.get("seconds", 1)))
                result = {"verdict": "pass"}
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=types.Content(role="model", parts=[types.Part(text=json.dumps(result))]),
            )

    agent = Behaviours(name="reviewer", description="Reviews a product against the rules.")
    return to_a2a(agent, host="127.0.0.1", port=port)


class AdkAgent:
    """A running ADK agent: its base URL (the card is under it)."""

    __test__ = False

    def __init__(self, proc: Any, url: str) -> None:
        self.proc = proc
        self.url = url


def adk_python() -> Path:
    """The Python of ADK's environment (``.peers/adk``, built on first use)."""
    from tests.support.venvs import cached_venv

    return cached_venv("adk", REQUIREMENTS) / "bin" / "python"


@contextmanager
def run_adk_agent() -> Iterator[AdkAgent]:
    """The ADK agent on a free loopback port, in ``.peers/adk``. (The test helpers are
    imported here: ADK's environment, which runs this module, has none of their
    dependencies.)"""
    from tests.support.processes import Proc, running
    from tests.support.serving import free_port
    from tests.support.venvs import BASE_DIR

    port = free_port()
    args = [str(adk_python()), "-m", "tests.support.adk_agent", str(port)]
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR), "ADK_DISABLE_TELEMETRY": "1"}
    with running(Proc(args, env, name="adk")) as proc:
        proc.wait_log(r"Uvicorn running on", timeout=120)
        yield AdkAgent(proc, f"http://127.0.0.1:{port}")


if __name__ == "__main__":
    import uvicorn

    PORT = int(sys.argv[1])
    uvicorn.run(build_app(PORT), host="127.0.0.1", port=PORT, log_level="info")
