"""Drive an agent's A2A HTTP+JSON side with the official a2a-sdk client, as the platform
does: ``message:send`` with ``returnImmediately``, then ``GET /tasks/{id}`` polls."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

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
)
from google.protobuf.struct_pb2 import Struct

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
    """``message:send`` with ``returnImmediately``; the agent answers with a Task."""
    async with await create_client(url, client_config=CLIENT_CONFIG) as client:
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        async for response in client.send_message(request):
            assert response.HasField("task"), response
            return response.task
    raise AssertionError("no response")


async def wait_for(url: str, task_id: str, states: set[int]) -> Task:
    """Poll ``GET /tasks/{id}`` until the task is in one of ``states``."""
    async with (
        await create_client(url, client_config=CLIENT_CONFIG) as client,
        asyncio.timeout(10),
    ):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state in states:
                return task
            await asyncio.sleep(0.05)


async def cancel(url: str, task_id: str) -> Task:
    async with await create_client(url, client_config=CLIENT_CONFIG) as client:
        return await client.cancel_task(CancelTaskRequest(id=task_id))


def output_of(task: Task) -> dict[str, Any]:
    """The data of the task's one data artifact."""
    (data,) = [d for artifact in task.artifacts for d in get_data_parts(artifact.parts)]
    return data
