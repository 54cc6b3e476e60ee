"""An ADK orchestrator uses the platform as a remote agent: Google's Agent Development Kit's
``RemoteA2aAgent`` (its A2A client, as ADK apps delegate to other agents) driven by ADK's
own runner, in ADK's environment (:mod:`tests.support.adk_agent`).

Run as ``<adk python> -m tests.support.adk_client BASE_URL TOKEN``: it resolves the
platform's card, then in one ADK session asks for a review that completes, one that asks a
question (then answers it in the same session: ADK resumes the remote task), and one that
fails. It prints one JSON object saying what ADK's events carried; the test asserts on it.
It imports nothing of the platform.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.runners import InMemoryRunner
from google.genai import types

from tests.support.adk_agent import TAG


def data_part(value: dict[str, Any]) -> Any:
    """A data part as ADK writes one (its part converter sends it as an A2A data part)."""
    blob = types.Blob(mime_type="text/plain", data=TAG[0] + json.dumps(value).encode() + TAG[1])
    return types.Part(inline_data=blob)


def said(event: Any) -> list[Any]:
    """What an ADK event carries, as JSON: texts, data and function calls."""
    found: list[Any] = []
    for part in (event.content.parts if event.content else None) or []:
        if part.text:
            found.append(part.text)
        elif part.inline_data is not None and part.inline_data.data:
            data = part.inline_data.data
            if data.startswith(TAG[0]):
                found.append(json.loads(data[len(TAG[0]) : -len(TAG[1])]))
        elif part.function_call is not None:
            found.append({"call": part.function_call.name, "args": part.function_call.args})
    return found


async def _bounded(events: Any, seconds: float = 30) -> Any:
    """The events of one turn, each within ``seconds``: a turn that waits for a stream
    that never ends fails here, saying so, rather than at the test's outer timeout."""
    while True:
        try:
            yield await asyncio.wait_for(anext(events), seconds)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise SystemExit(f"no event from the platform within {seconds} s") from None


async def scenario(base: str, token: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    remote = RemoteA2aAgent(
        name="platform",
        agent_card=f"{base}/.well-known/agent-card.json",
        httpx_client=http,
        # The platform offers several skills: ADK names one in the request's metadata.
        a2a_request_meta_provider=lambda _ctx, _message: {"skillId": "ce-review"},
    )
    runner = InMemoryRunner(agent=remote, app_name="orchestrator")

    async def turn(session_id: str, *parts: Any) -> list[Any]:
        events: list[Any] = []
        message = types.Content(role="user", parts=list(parts))
        async for event in _bounded(
            runner.run_async(user_id="u", session_id=session_id, new_message=message)
        ):
            events.append(
                {
                    "said": said(event),
                    "error": event.error_message,
                    "meta": {
                        k.removeprefix("a2a:"): v
                        for k, v in (event.custom_metadata or {}).items()
                        if k in ("a2a:task_id", "a2a:context_id")
                    },
                }
            )
        return events

    async def session() -> str:
        created = await runner.session_service.create_session(app_name="orchestrator", user_id="u")
        return created.id

    one = await session()
    seen["complete"] = await turn(one, data_part({"product": "lamp", "behaviour": "complete"}))
    two = await session()
    seen["ask"] = await turn(two, data_part({"product": "lamp", "behaviour": "ask"}))
    seen["answer"] = await turn(two, types.Part(text="EU"))
    three = await session()
    seen["fail"] = await turn(three, data_part({"product": "lamp", "behaviour": "fail"}))
    seen["text"] = await turn(await session(), types.Part(text="Review the lamp, please."))
    await http.aclose()
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(scenario(sys.argv[1], sys.argv[2])), default=str))
