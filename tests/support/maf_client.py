"""Microsoft Agent Framework uses the platform as a remote agent: its ``A2AAgent`` (the
framework's A2A client, as its apps and workflows call other agents), in its own
environment (``.peers/maf``, built by :func:`maf_python`).

Run as ``<maf python> -m tests.support.maf_client BASE_URL TOKEN AGENT_ID``: for each
binding the platform's card offers, it asks for a review that completes, one that asks a
question and is answered in the same session, one that fails, one streamed, and one in
the background, followed by polling and by resubscribing; then, given only a URL (as the
framework's examples do: it speaks JSON-RPC there), the platform's and an agent's on it,
a run and a streamed run each. The framework sends text only, so the input goes as JSON
in a text part. It prints one JSON object saying what the framework's responses carried;
the test asserts on it. It imports nothing of the platform.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

REQUIREMENTS = (
    "agent-framework-a2a==1.0.0b261022",
    "agent-framework-core==1.26.0",
    "a2a-sdk[http-server]==1.3.0",
    "uvicorn==0.55.0",  # the agents of tests.support.maf_agent
)


def maf_python() -> Path:
    """The Python of the framework's environment (``.peers/maf``, built on first use)."""
    from tests.support.venvs import peer_python

    return peer_python("maf", REQUIREMENTS)


def review(behaviour: str, **extra: Any) -> str:
    return json.dumps({"product": "lamp", "behaviour": behaviour, **extra})


def read(text: str) -> Any:
    """A response's text: the platform's data parts come as JSON text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def conversation(agent: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    response = await agent.run(review("complete"))
    seen["complete"] = read(response.text)

    session = agent.create_session()
    asked = await agent.run(review("ask"), session=session)
    seen["asked"] = [request.text for request in asked.user_input_requests]
    answered = await agent.run("EU", session=session)
    seen["answered"] = read(answered.text)
    seen["same_task"] = asked.response_id == answered.response_id

    try:
        failed = await agent.run(review("fail"))
        seen["failed"] = {"text": failed.text}
    except Exception as exc:  # the framework may raise for a failed task
        seen["failed"] = {"raised": type(exc).__name__, "text": str(exc)}

    updates = [update async for update in agent.run(review("slow", seconds=0.5), stream=True)]
    seen["streamed"] = read("".join(update.text for update in updates))

    # In the background: a continuation token, then GetTask until the task ends.
    started = await agent.run(review("slow", seconds=1), background=True)
    token = started.continuation_token
    seen["background_token"] = token is not None
    polls = 0
    response = started
    while response.continuation_token is not None and polls < 100:
        polls += 1
        await asyncio.sleep(0.1)
        response = await agent.poll_task(response.continuation_token)
    seen["polled"] = read(response.text)
    seen["polls"] = polls

    # Or resubscribing to the task's stream with the token.
    started = await agent.run(review("slow", seconds=1), background=True)
    resumed = await agent.run(continuation_token=started.continuation_token)
    seen["resubscribed"] = read(resumed.text)
    return seen


async def scenario(base: str, token: str, agent_id: str) -> dict[str, Any]:
    import httpx
    from a2a.client import A2ACardResolver
    from agent_framework.a2a import A2AAgent

    seen: dict[str, Any] = {}
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=auth, timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        seen["interfaces"] = [
            [i.protocol_binding, i.protocol_version] for i in card.supported_interfaces
        ]
        for binding in dict.fromkeys(i.protocol_binding for i in card.supported_interfaces):
            agent = A2AAgent(
                agent_card=card, http_client=http, supported_protocol_bindings=[binding]
            )
            seen[binding] = await conversation(agent)
        # Given a URL alone, the framework makes a card of it with one JSON-RPC interface:
        # the platform's, and one agent's on the platform.
        for key, url in (("url", f"{base}/v1/a2a"), ("agent_url", f"{base}/v1/a2a/{agent_id}")):
            agent = A2AAgent(url=url, http_client=http)
            response = await agent.run(review("complete"))
            updates = [u async for u in agent.run(review("slow", seconds=0.5), stream=True)]
            seen[key] = [read(response.text), read("".join(u.text for u in updates))]
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(scenario(*sys.argv[1:4])), default=str))
