"""End to end with independent clients: the official a2a-sdk 0.3 client and Google ADK's
``RemoteA2aAgent`` (each in its own environment, a child process), two callers whose ids
collide seen at a real a2a-sdk agent, an agent's bare Message answer, and hostile bytes
through daphne. Slow (boots processes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict

from a2a.face.asgi import speaks_jsonrpc
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a_face.test_live_sdk import message, sdk_client, send
from tests.a2a_face.webhook import Webhook
from tests.support.adk_agent import adk_python
from tests.support.agents import TestAgent
from tests.support.legacy_sdk import legacy_python
from tests.support.venvs import BASE_DIR


async def the_ids_and_message_scenario(world: dict[str, Any], peer: TestAgent) -> None:
    url = world["url"]

    def same_ids(behaviour: str, message_id: str = "same-mid-1") -> pb.Message:
        msg = message(behaviour)
        msg.message_id, msg.context_id = message_id, "session-1"
        return msg

    async with (
        sdk_client(url, world["alice"], "HTTP+JSON") as (alice, _),
        sdk_client(url, world["bob"], "JSONRPC") as (bob, _),
    ):
        alice_task = await send(alice, same_ids("complete"))
        bob_task = await send(bob, same_ids("complete"))
        alice_again = await send(alice, same_ids("complete", "mid-2"))
        # Each caller sees its own ids.
        for task in (alice_task, bob_task):
            assert task.context_id == "session-1"
            assert task.history[0].message_id == "same-mid-1"

        # At the agent: two callers, two contexts and two message ids; one caller's
        # conversation stays one context.
        received = {m["messageId"]: m for m in peer.messages}
        firsts = [m for mid, m in received.items() if mid.endswith(":same-mid-1")]
        assert len(firsts) == 2
        assert firsts[0]["contextId"] != firsts[1]["contextId"]
        second = next(m for mid, m in received.items() if mid.endswith(":mid-2"))
        assert {m["contextId"] for m in firsts} >= {second["contextId"]}
        assert "session-1" not in {m["contextId"] for m in peer.messages}
        assert alice_again.context_id == "session-1"

        # A bare Message answer reaches the client as a Message.
        request = pb.SendMessageRequest(message=same_ids("message", "mid-3"))
        events = [event async for event in alice.send_message(request)]
        assert events[-1].HasField("message")
        answer = MessageToDict(events[-1].message)
        assert answer["parts"][0]["data"] == {"verdict": "pass"}
        assert answer["contextId"] == "session-1"
        assert answer["role"] == "ROLE_AGENT"


@pytest.mark.slow
def test_callers_ids_never_meet_at_the_agent_and_a_message_answer_stays_a_message(
    world: dict[str, Any], peer: TestAgent
) -> None:
    asyncio.run(the_ids_and_message_scenario(world, peer))


@pytest.mark.slow
def test_an_a2a_0_3_client_uses_the_platform(world: dict[str, Any]) -> None:
    """The official a2a-sdk 0.3 client, in its own environment, against a real daphne."""
    script = Path(__file__).resolve().parents[1] / "support" / "legacy_client.py"
    hook = Webhook()
    try:
        run = subprocess.run(
            [
                str(legacy_python()),
                str(script),
                world["url"],
                world["alice"],
                "ce-review",
                hook.url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        hook.close()
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["card"] == {"url": f"{world['url']}/v1/a2a/jsonrpc", "transport": "JSONRPC"}
    assert seen["card_version"] == "0.3"
    assert seen["send"] == {"state": "completed", "artifact": {"verdict": "pass"}}
    assert seen["get"] == {"id": True, "state": "completed"}
    assert seen["get_history"] == 1
    assert seen["cancel"] == "canceled"
    assert seen["stream"][-1] == "completed"
    assert (seen["asked"], seen["answered"]) == ("input-required", "completed")
    assert seen["resubscribe"][0] == "input-required"
    assert seen["resubscribe"][-1] == "completed"
    assert seen["push"] == {"stored": hook.url, "read": "tok-03", "task": True}
    assert seen["resubscribe_unknown"] == "A2AClientJSONRPCError"
    assert seen["auth_interceptor"] == "completed"


@pytest.mark.slow
def test_bad_bytes_on_a_real_daphne_get_json_4xx(world: dict[str, Any]) -> None:
    """The face behind daphne and its lean ASGI handler: hostile requests are JSON 4xx."""
    url, auth = world["url"], {"Authorization": f"Bearer {world['alice']}"}
    deep = "[" * 100_000 + "]" * 100_000
    rpc = '{"jsonrpc": "2.0", "id": "\\udcff", "method": "GetTask", "params": {}}'
    requests = [
        ("GET", "/v1/a2a/tasks?contextId=a%00b", None, {}),
        ("GET", "/v1/a2a/tasks/%ED%B2%80", None, {}),
        ("GET", "/v1/a2a/tasks", None, {"A2A-Version": "9" * 5000}),
        ("POST", "/v1/a2a/message:send", deep, {}),
        ("POST", "/v1/a2a/jsonrpc/", deep, {}),
        ("POST", "/v1/a2a/jsonrpc", rpc, {}),
        ("POST", "/v1/a2a/message:send", '{"message": {"messageId": "\\u0000"}}', {}),
        ("POST", "/v1/a2a/message:send", b"\xff\xfe{", {}),
        ("POST", "/v1/a2a", deep, {}),  # the interface URL: JSON-RPC posts
        ("POST", "/v1/a2a/agent-one/", b"\xff\xfe{", {}),
    ]
    with httpx.Client(base_url=url, headers=auth, timeout=30) as http:
        for method, path, body, headers in requests:
            response = http.request(
                method,
                path,
                content=body,
                headers={"Content-Type": "application/json", **headers},
            )
            assert 400 <= response.status_code < 500 or (
                speaks_jsonrpc(path, method) and "error" in response.json()
            ), (path, response.status_code, response.text[:200])
            assert response.headers["Content-Type"] == "application/json", path


@pytest.mark.slow
def test_an_adk_orchestrator_delegates_to_the_platform(
    world: dict[str, Any], make_skill: Any
) -> None:
    """Google ADK's ``RemoteA2aAgent`` (ADK's A2A client, in its own environment) driven by
    ADK's runner: a task that completes, one that asks (ADK shows the question as a
    request for the user's input) and is answered in the same session, one that fails,
    and a message with only text. It streams each send and waits for the stream's end;
    it names the skill in the request's metadata (its ``a2a_request_meta_provider``), as
    the platform offers two."""
    make_skill(id="ce-summary", name="CE summary")
    run = subprocess.run(
        [str(adk_python()), "-m", "tests.support.adk_client", world["url"], world["alice"]],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=BASE_DIR,
        env={**os.environ, "ADK_DISABLE_TELEMETRY": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    def said(turn: str) -> list[Any]:
        return [item for event in seen[turn] for item in event["said"]]

    def task_ids(turn: str) -> set[str]:
        return {event["meta"]["task_id"] for event in seen[turn]}

    assert said("complete") == [{"verdict": "pass"}]
    assert said("ask")[-1] == {
        "call": "mock_function_call_for_required_user_input",
        "args": {"input_required": "Which market: EU or UK?"},
    }
    # The answer resumed the same task (ADK sends it with the task's id).
    assert {"verdict": "pass", "answer": "EU"} in said("answer")
    assert task_ids("answer") == task_ids("ask")
    assert said("fail") == ["The agent broke."]
    assert said("text") == [{"verdict": "pass"}]
    tasks = Task.objects.order_by("created_at")
    assert [t.state for t in tasks] == [
        TaskState.COMPLETED,
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.COMPLETED,
    ]
    assert {str(t.id) for t in tasks} == {
        i for turn in ("complete", "ask", "fail", "text") for i in task_ids(turn)
    }
