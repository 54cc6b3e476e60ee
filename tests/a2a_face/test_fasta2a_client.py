"""FastA2A's client (the A2A library behind Pydantic AI) as a caller of the face: it posts
0.3's ``message/send`` with 1.0 objects and reads 1.0 answers with lowercase states and
roles (:mod:`a2a.face.hybrid`). Before, it read a send's answer as empty and its file
parts were refused. The real ``fasta2a.client.A2AClient``, through the face's ASGI app."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from fasta2a.client import A2AClient

from a2a.face.asgi import FaceASGIHandler
from a2a.face.db import close_pool
from a2a.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

URL = "http://127.0.0.1/v1/a2a/jsonrpc"


@pytest.fixture(autouse=True)
def _close_the_pool() -> Iterator[None]:
    yield
    close_pool()


def with_client(token: str, run: Callable[[A2AClient, httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def call() -> Any:
        transport = httpx.ASGITransport(app=FaceASGIHandler())
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, headers=headers) as http:
            return await run(A2AClient(agent=URL, http_client=http), http)

    return asyncio.run(call())


def message(*parts: dict[str, Any], message_id: str = "m-1") -> dict[str, Any]:
    return {"role": "user", "parts": list(parts), "message_id": message_id}


def test_a_send_answers_the_task_as_fasta2a_reads_it(agent: Any, alice: Any) -> None:
    async def run(client: A2AClient, http: httpx.AsyncClient) -> Any:
        sent = await client.send_message(
            message({"data": {"product": "lamp"}}), configuration={"blocking": False}
        )
        got = await client.get_task(sent["result"]["task"]["id"])
        return sent, got

    sent, got = with_client(alice.raw_token, run)
    task = sent["result"]["task"]
    assert task["status"]["state"] == "submitted"
    assert task["history"][0]["role"] == "user"
    assert task["history"][0]["parts"] == [{"data": {"product": "lamp"}}]
    assert task["metadata"]["agentId"] == agent.id
    assert got["result"]["id"] == task["id"]
    assert got["result"]["status"]["state"] == "submitted"
    stored = Task.objects.get(pk=task["id"])
    assert stored.input == {"product": "lamp"}
    assert stored.created_by == alice


def test_its_file_parts_and_text_reach_the_task(agent: Any, alice: Any) -> None:
    raw = base64.b64encode(b"%PDF-1.7 manual").decode()
    file_part = {"raw": raw, "filename": "manual.pdf", "media_type": "application/pdf"}

    async def run(client: A2AClient, http: httpx.AsyncClient) -> Any:
        text_part = {"text": '{"product": "lamp"}'}
        return await client.send_message(
            message(text_part, file_part), configuration={"blocking": False}
        )

    sent = with_client(alice.raw_token, run)
    assert "error" not in sent, sent
    stored = Task.objects.get(pk=sent["result"]["task"]["id"])
    parts = stored.outbound_message["parts"]
    assert parts[1] == {"raw": raw, "filename": "manual.pdf", "mediaType": "application/pdf"}


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"message": {"role": "user", "parts": [], "messageId": "m"}}, "no part"),
        ({"message": {"role": "robot", "parts": [{"text": "x"}], "messageId": "m"}}, "role"),
        ({"message": {"role": "user", "parts": [{"text": "x"}]}}, "no messageId"),
        (
            {
                "message": {"role": "user", "parts": [{"text": "x"}], "messageId": "m"},
                "configuration": "fast",
            },
            "configuration",
        ),
    ],
)
def test_a_bad_send_in_its_dialect_is_invalid_params(
    agent: Any, alice: Any, params: dict[str, Any], why: str
) -> None:
    async def run(client: A2AClient, http: httpx.AsyncClient) -> Any:
        body = {"jsonrpc": "2.0", "id": "1", "method": "message/send", "params": params}
        return (await http.post(URL, json=body)).json()

    answer = with_client(alice.raw_token, run)
    assert answer["error"]["code"] == -32602, (why, answer)
    assert not Task.objects.exists()


@pytest.mark.slow
def test_a_fasta2a_client_gets_a_real_agents_answer_sent_and_streamed(
    world: dict[str, Any],
) -> None:
    """A live platform (daphne, workers) and a real a2a-sdk agent: a blocking send ends
    COMPLETED with the agent's artifact; a streamed one's events end with it."""

    async def run() -> tuple[Any, list[Any]]:
        headers = {"Authorization": f"Bearer {world['alice']}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            client = A2AClient(agent=f"{world['url']}/v1/a2a/jsonrpc", http_client=http)
            sent = await client.send_message(message({"data": {"product": "lamp"}}))
            streamed = [
                event
                async for event in client.stream_message(
                    message({"data": {"product": "kettle"}}, message_id="m-2")
                )
            ]
            return sent, streamed

    sent, streamed = asyncio.run(run())
    task = sent["result"]["task"]
    assert task["status"]["state"] == "completed", sent
    assert task["artifacts"][0]["parts"][0]["data"] == {"verdict": "pass"}
    results = [event["result"] for event in streamed]
    assert all("error" not in event for event in streamed), streamed
    last = results[-1]
    final = last.get("task") or last.get("status_update") or {}
    assert final["status"]["state"] == "completed", results


def test_its_reads_of_a_task_it_made_keep_file_parts_and_data(agent: Any, alice: Any) -> None:
    """``tasks/get`` and ``tasks/cancel`` name no message: the task its send made says
    which mix it came in, and they answer in it. 0.3's Task lost FastA2A's file parts
    (``file``) and wrapped data that is no object (``value``)."""
    raw = base64.b64encode(b"%PDF-1.7").decode()
    parts = [
        {"raw": raw, "filename": "a.pdf", "media_type": "application/pdf"},
        {"url": "https://files.example/f.pdf"},
        {"data": [1, 2]},
    ]

    async def run(client: A2AClient, http: httpx.AsyncClient) -> Any:
        sent = await client.send_message(message(*parts), configuration={"blocking": False})
        task_id = sent["result"]["task"]["id"]
        got = await client.get_task(task_id)
        body = {"jsonrpc": "2.0", "id": "c", "method": "tasks/cancel", "params": {"id": task_id}}
        canceled = (await http.post(URL, json=body)).json()
        return got, canceled

    got, canceled = with_client(alice.raw_token, run)
    assert got["result"]["history"][0]["parts"] == parts
    assert got["result"]["status"]["state"] == "submitted"
    assert "kind" not in got["result"]
    assert canceled["result"]["status"]["state"] == "canceled"
    assert "kind" not in canceled["result"]


def test_a_0_3_client_still_gets_0_3_shapes_sent_and_read(agent: Any, alice: Any) -> None:
    async def run(client: A2AClient, http: httpx.AsyncClient) -> Any:
        msg = {
            "kind": "message",
            "role": "user",
            "messageId": "m-03",
            "parts": [{"kind": "data", "data": {"product": "lamp"}}],
        }
        params = {"message": msg, "configuration": {"blocking": False}}
        body = {"jsonrpc": "2.0", "id": "1", "method": "message/send", "params": params}
        sent = (await http.post(URL, json=body)).json()
        get = {
            "jsonrpc": "2.0",
            "id": "2",
            "method": "tasks/get",
            "params": {"id": sent["result"]["id"]},
        }
        return sent, (await http.post(URL, json=get)).json()

    sent, got = with_client(alice.raw_token, run)
    assert sent["result"]["kind"] == "task"
    assert sent["result"]["status"]["state"] == "submitted"
    assert got["result"]["kind"] == "task"
    assert got["result"]["history"][0]["parts"][0]["kind"] == "data"
