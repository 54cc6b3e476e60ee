"""The reference agent's A2A HTTP+JSON side, driven by the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_data_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.struct_pb2 import Struct
from reference_agent.skill import schema_errors

from tests.refagent.support import OUTPUT_SCHEMA, http_side

CLIENT_CONFIG = ClientConfig(streaming=False, supported_protocol_bindings=["HTTP+JSON"])


def user_message(
    data: dict[str, Any] | None = None, text: str | None = None, **ids: str
) -> Message:
    parts = [new_data_part(data)] if data is not None else [new_text_part(text or "")]
    metadata = Struct()
    metadata.update({"skillId": ids.pop("skill_id", "ce-review")})
    return Message(
        message_id=ids.pop("message_id", str(uuid.uuid4())),
        role=Role.ROLE_USER,
        parts=parts,
        metadata=metadata,
        **ids,
    )


async def send(url: str, message: Message) -> Task:
    """``message:send`` with ``returnImmediately``, as the platform sends it."""
    async with await create_client(url, client_config=CLIENT_CONFIG) as client:
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        async for response in client.send_message(request):
            assert response.HasField("task"), response
            return response.task
    raise AssertionError("no response")


async def wait_for(url: str, task_id: str, states: set[int]) -> Task:
    """Poll ``GET /tasks/{id}`` as the platform does, until one of ``states``."""
    async with (
        await create_client(url, client_config=CLIENT_CONFIG) as client,
        asyncio.timeout(10),
    ):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state in states:
                return task
            await asyncio.sleep(0.05)


def output_of(task: Task) -> dict[str, Any]:
    (data,) = [d for artifact in task.artifacts for d in get_data_parts(artifact.parts)]
    return data


def test_it_completes_a_task_with_output_that_fits_the_skill() -> None:
    with http_side() as agent:
        task = asyncio.run(send(agent.url, user_message({"product": "kettle"})))
        done = asyncio.run(wait_for(agent.url, task.id, {TaskState.TASK_STATE_COMPLETED}))
    output = output_of(done)
    assert output["product"] == "kettle"
    assert schema_errors(OUTPUT_SCHEMA, output) == []


def test_it_asks_a_question_and_completes_with_the_answer_on_the_same_task() -> None:
    with http_side() as agent:
        first = user_message({"product": "kettle", "demo": {"ask": "Which market?"}})
        task = asyncio.run(send(agent.url, first))
        asked = asyncio.run(wait_for(agent.url, task.id, {TaskState.TASK_STATE_INPUT_REQUIRED}))
        assert asked.status.message.parts[0].text == "Which market?"
        reply = user_message(text="EU", task_id=task.id, context_id=task.context_id)
        asyncio.run(send(agent.url, reply))
        done = asyncio.run(wait_for(agent.url, task.id, {TaskState.TASK_STATE_COMPLETED}))
    assert output_of(done)["answer"] == "EU"


def test_it_runs_a_message_sent_twice_only_once() -> None:
    with http_side() as agent:
        message = user_message({"product": "kettle"}, message_id="same-message-id")
        first = asyncio.run(send(agent.url, message))
        again = asyncio.run(send(agent.url, message))
        assert again.id == first.id
        asyncio.run(wait_for(agent.url, first.id, {TaskState.TASK_STATE_COMPLETED}))
        executor = agent._app.state.executor  # type: ignore[union-attr]
        assert list(executor.jobs) == [first.id]


def test_it_fails_a_task_when_the_input_says_so() -> None:
    with http_side() as agent:
        task = asyncio.run(send(agent.url, user_message({"demo": {"fail": "no datasheet"}})))
        failed = asyncio.run(wait_for(agent.url, task.id, {TaskState.TASK_STATE_FAILED}))
    assert "no datasheet" in failed.status.message.parts[0].text


def test_it_rejects_a_task_for_another_skill() -> None:
    with http_side() as agent:
        task = asyncio.run(send(agent.url, user_message({}, skill_id="other-skill")))
        rejected = asyncio.run(wait_for(agent.url, task.id, {TaskState.TASK_STATE_REJECTED}))
    assert "other-skill" in rejected.status.message.parts[0].text


def test_it_cancels_a_slow_task() -> None:
    async def scenario(url: str) -> Task:
        task = await send(url, user_message({"demo": {"delaySeconds": 30}}))
        await wait_for(url, task.id, {TaskState.TASK_STATE_WORKING})
        async with await create_client(url, client_config=CLIENT_CONFIG) as client:
            return await client.cancel_task(CancelTaskRequest(id=task.id))

    with http_side() as agent:
        canceled = asyncio.run(scenario(agent.url))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        final = asyncio.run(wait_for(agent.url, canceled.id, {TaskState.TASK_STATE_CANCELED}))
    assert final.status.state == TaskState.TASK_STATE_CANCELED


def test_it_answers_an_unknown_task_with_the_a2a_not_found_error() -> None:
    with http_side() as agent:
        response = httpx.get(f"{agent.url}/tasks/nope", headers={"A2A-Version": "1.0"})
    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


def test_it_serves_health_and_its_agent_card() -> None:
    with http_side() as agent:
        health = httpx.get(f"{agent.url}/health").json()
        card = httpx.get(f"{agent.url}/.well-known/agent-card.json").json()
    assert health["status"] == "ok"
    assert card["skills"][0]["id"] == "ce-review"
    assert card["supportedInterfaces"] == [
        {"url": agent.url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ]


@pytest.mark.parametrize("path", ["/message:send", "/tasks/x:cancel"])
def test_it_refuses_a_malformed_request_with_a_400(path: str) -> None:
    with http_side() as agent:
        response = httpx.post(
            f"{agent.url}{path}",
            content=b"{not json",
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        )
    assert response.status_code in (400, 404)
    assert "error" in response.json()
