"""An A2A 0.3 client scenario against the platform, run with a2a-sdk 0.3 (its own venv).

Run as ``<legacy_python> tests/support/legacy_client.py BASE_URL TOKEN SKILL_ID HOOK_URL``
(see :func:`tests.support.legacy_sdk.legacy_python`): it discovers the platform from its
card with the 0.3 SDK, then sends (blocking), gets, sends without blocking and cancels,
streams, resubscribes across an INPUT_REQUIRED round trip, sets and reads a push
config, resubscribes to an unknown task and sends with its credentials given through the
SDK's auth interceptor. It prints one JSON object saying what it saw; the test asserts on
it. It imports nothing of the platform: it is an independent 0.3 client.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
from a2a.client.middleware import ClientCallContext
from a2a.types import (
    DataPart,
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
)


def message(skill_id: str, behaviour: str, *, task: Task | None = None, **data: Any) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=DataPart(data={"product": "lamp", "behaviour": behaviour, **data}))],
        metadata={"skillId": skill_id},
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


def last_task(events: list[Any]) -> Task:
    event = events[-1]
    return event[0] if isinstance(event, tuple) else event


def state_of(event: Any) -> str | None:
    """The state an event tells, read when it arrives (the SDK updates one Task object
    in place as later events come)."""
    if not isinstance(event, tuple):
        return None
    task, update = event
    if update is None:
        return task.status.state.value
    return update.status.state.value if hasattr(update, "status") else None


async def states(stream: Any) -> list[str]:
    return [s async for e in stream if (s := state_of(e)) is not None]


async def scenario(base: str, token: str, skill_id: str, hook: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        seen["card"] = {"url": card.url, "transport": card.preferred_transport}
        seen["card_version"] = card.protocol_version

        def client(*, streaming: bool) -> Any:
            config = ClientConfig(
                httpx_client=http, supported_transports=["JSONRPC"], streaming=streaming
            )
            return ClientFactory(config).create(card)

        plain, streamer = client(streaming=False), client(streaming=True)

        # Blocking send: the finished task with the agent's artifact.
        done = last_task([e async for e in plain.send_message(message(skill_id, "complete"))])
        seen["send"] = {
            "state": done.status.state.value,
            "artifact": done.artifacts[0].parts[0].root.data if done.artifacts else None,
        }
        got = await plain.get_task(TaskQueryParams(id=done.id, history_length=1))
        seen["get"] = {"id": got.id == done.id, "state": got.status.state.value}
        seen["get_history"] = len(got.history or [])

        # Non-blocking send, then cancel.
        now = MessageSendConfiguration(blocking=False)
        busy = last_task(
            [e async for e in plain.send_message(message(skill_id, "working"), configuration=now)]
        )
        await asyncio.sleep(0.5)
        canceled = await plain.cancel_task(TaskIdParams(id=busy.id))
        seen["cancel"] = canceled.status.state.value

        # Streaming send.
        seen["stream"] = await states(streamer.send_message(message(skill_id, "slow", seconds=0.3)))

        # INPUT_REQUIRED, a resubscription open across the answer.
        asked = last_task([e async for e in plain.send_message(message(skill_id, "ask"))])
        seen["asked"] = asked.status.state.value

        follower = asyncio.ensure_future(states(streamer.resubscribe(TaskIdParams(id=asked.id))))
        await asyncio.sleep(1.0)
        answer = message(skill_id, "answer", task=asked, answer="EU")
        answered = last_task([e async for e in plain.send_message(answer)])
        seen["answered"] = answered.status.state.value
        seen["resubscribe"] = await asyncio.wait_for(follower, 30)

        # Push notification config: set, then get.
        config = PushNotificationConfig(id="hook-1", url=hook, token="tok-03")
        stored = await plain.set_task_callback(
            TaskPushNotificationConfig(task_id=asked.id, push_notification_config=config)
        )
        read = await plain.get_task_callback(
            GetTaskPushNotificationConfigParams(id=asked.id, push_notification_config_id="hook-1")
        )
        seen["push"] = {
            "stored": stored.push_notification_config.url,
            "read": read.push_notification_config.token,
            "task": read.task_id == asked.id,
        }

        # A streaming method's error, sent as the stream's one event: the SDK's own error.
        try:
            await states(streamer.resubscribe(TaskIdParams(id=str(uuid.uuid4()))))
            seen["resubscribe_unknown"] = None
        except Exception as exc:  # which one is what the test asserts
            seen["resubscribe_unknown"] = type(exc).__name__
    seen["auth_interceptor"] = await through_auth_interceptor(base, token, skill_id)
    return seen


async def through_auth_interceptor(base: str, token: str, skill_id: str) -> str:
    """A send whose credentials come from the SDK's own auth path (``AuthInterceptor``
    and a credential store keyed by the card's security scheme name), not from headers
    set by hand: it finds the scheme in the card's 0.3 ``security`` fields."""
    async with httpx.AsyncClient(timeout=30) as bare:
        card = await A2ACardResolver(bare, base).get_agent_card()
        store = InMemoryContextCredentialStore()
        await store.set_credentials("session", "bearer", token)
        config = ClientConfig(httpx_client=bare, supported_transports=["JSONRPC"], streaming=False)
        client = ClientFactory(config).create(card, interceptors=[AuthInterceptor(store)])
        context = ClientCallContext(state={"sessionId": "session"})
        try:
            events = [
                e async for e in client.send_message(message(skill_id, "complete"), context=context)
            ]
        except Exception as exc:  # reported to the test
            return f"{type(exc).__name__}: {exc}"[:300]
        return last_task(events).status.state.value


def main() -> None:
    base, token, skill_id, hook = sys.argv[1:5]
    print(json.dumps(asyncio.run(scenario(base, token, skill_id, hook))))


if __name__ == "__main__":
    main()
