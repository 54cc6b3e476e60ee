"""A2A 0.3 JSON-RPC on the face, beside 1.0, on the same URL (told apart by method names):
0.3 shapes in and out, the same tasks through both versions, version checks."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from a2a.face.jsonrpc import _Call
from a2a.face.responses import sse_response
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from tests.a2a_face.conftest import FaceClient
from tests.a2a_face.schema import sse_events

pytestmark = pytest.mark.django_db

V03 = {"A2A-Version": ""}  # 0.3 clients send no version


def _message(**overrides: Any) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": f"m-{uuid.uuid4().hex[:6]}",
        "role": "user",
        "parts": [
            {"kind": "data", "data": {"product": "lamp", "n": 1}},
            {"kind": "text", "text": "hi"},
        ],
    } | overrides


def _rpc(client: FaceClient, method: str, params: Any, **headers: str) -> Any:
    return client.rpc(method, params, **{**V03, **headers}).json()


def test_message_send_answers_a_0_3_task(as_alice: FaceClient, agent: Any) -> None:
    body = _rpc(
        as_alice,
        "message/send",
        {"message": _message(contextId="ctx-03"), "configuration": {"blocking": False}},
    )
    result = body["result"]
    assert result["kind"] == "task"
    assert result["status"]["state"] == "submitted"
    assert result["contextId"] == "ctx-03"
    assert result["history"][0]["role"] == "user"
    assert result["history"][0]["parts"][0] == {"kind": "data", "data": {"product": "lamp", "n": 1}}
    task = Task.objects.get(pk=result["id"])
    # The agent gets the message in 1.0 shape, values untouched.
    assert task.outbound_message["role"] == "ROLE_USER"
    assert task.outbound_message["parts"][0] == {"data": {"product": "lamp", "n": 1}}


def test_the_same_task_is_visible_through_both_versions(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.require_input({"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which?"}]})
    legacy = _rpc(as_alice, "tasks/get", {"id": str(task.id), "historyLength": 1})["result"]
    assert legacy["status"]["state"] == "input-required"
    assert legacy["status"]["message"]["kind"] == "message"
    assert legacy["status"]["message"]["role"] == "agent"
    assert len(legacy["history"]) == 1
    current = as_alice.rpc("GetTask", {"id": str(task.id)}).json()["result"]
    assert current["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert current["id"] == legacy["id"]


def test_cancel_and_its_errors_in_0_3(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    canceled = _rpc(as_alice, "tasks/cancel", {"id": str(task.id)})["result"]
    assert canceled["status"]["state"] == "canceled"
    again = _rpc(as_alice, "tasks/cancel", {"id": str(task.id)})
    assert again["error"]["code"] == -32002
    missing = _rpc(as_alice, "tasks/get", {"id": str(uuid.uuid4())})
    assert missing["error"]["code"] == -32001
    finished = _stream_error(as_alice, "tasks/resubscribe", {"id": str(task.id)})
    assert finished["error"]["code"] == -32004


def _stream_error(client: FaceClient, method: str, params: Any) -> Any:
    """The one event of a 0.3 streaming method's stream, as 0.3 servers send an error."""
    response = client.rpc(method, params, **V03)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    (event,) = sse_events(body)
    assert (event["jsonrpc"], event["id"]) == ("2.0", "1")
    return event


def test_errors_of_0_3_streaming_methods_are_their_streams_one_event(
    as_alice: FaceClient, agent: Any
) -> None:
    """a2a-sdk 0.3 and @a2a-js/sdk 0.3 read a streaming method's answer only as an event
    stream (0.3 servers send its error as the one event); a JSON body made them raise
    "Invalid SSE response" / "Invalid response Content-Type", and the error's code was
    lost. Refusals of the request itself (401, 413...) stay JSON, as for any method."""
    unknown = _stream_error(as_alice, "tasks/resubscribe", {"id": str(uuid.uuid4())})
    assert unknown["error"]["code"] == -32001
    bad = _stream_error(as_alice, "message/stream", {"message": {"kind": "message"}})
    assert bad["error"]["code"] == -32602
    refused = FaceClient(None).rpc("message/stream", {"message": _message()}, **V03)
    assert refused.status_code == 401
    assert refused["Content-Type"].startswith("application/json")
    # 1.0 streaming methods answer an ordinary JSON error before any stream starts.
    current = as_alice.rpc("SubscribeToTask", {"id": str(uuid.uuid4())})
    assert current["Content-Type"].startswith("application/json")
    assert current.json()["error"]["code"] == -32001


def test_push_configs_in_0_3_shapes(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    task = make_task(alice)
    config = {
        "id": "hook-03",
        "url": "http://127.0.0.1:9/hook",
        "token": "t",
        "authentication": {"schemes": ["Bearer"], "credentials": "c"},
    }
    stored = _rpc(
        as_alice,
        "tasks/pushNotificationConfig/set",
        {"taskId": str(task.id), "pushNotificationConfig": config},
    )["result"]
    assert stored == {"taskId": str(task.id), "pushNotificationConfig": config}
    got = _rpc(
        as_alice,
        "tasks/pushNotificationConfig/get",
        {"id": str(task.id), "pushNotificationConfigId": "hook-03"},
    )["result"]
    assert got["pushNotificationConfig"]["url"] == config["url"]
    first = _rpc(as_alice, "tasks/pushNotificationConfig/get", {"id": str(task.id)})["result"]
    assert first["pushNotificationConfig"]["id"] == "hook-03"
    listed = _rpc(as_alice, "tasks/pushNotificationConfig/list", {"id": str(task.id)})["result"]
    assert [c["pushNotificationConfig"]["id"] for c in listed] == ["hook-03"]
    deleted = _rpc(
        as_alice,
        "tasks/pushNotificationConfig/delete",
        {"id": str(task.id), "pushNotificationConfigId": "hook-03"},
    )
    assert deleted["result"] is None
    assert PushNotificationConfig.objects.count() == 0


def test_0_3_credentials_without_a_scheme_are_refused(
    as_alice: FaceClient, alice: Any, agent: Any, make_task: Callable[..., Task], settings: Any
) -> None:
    """0.3's ``schemes: []`` with credentials is 1.0's authentication without a scheme:
    refused (its POSTs went without the credentials), on set and with a send. Without
    credentials it asks for nothing, and is taken as no authentication, as before."""
    settings.ALLOW_LOOPBACK_URLS = True
    task = make_task(alice)
    auth = {"schemes": [], "credentials": "c"}
    empty = {"url": "http://127.0.0.1:9/hook", "authentication": auth}
    refused = _rpc(
        as_alice,
        "tasks/pushNotificationConfig/set",
        {"taskId": str(task.id), "pushNotificationConfig": empty},
    )["error"]
    assert refused["code"] == -32602
    assert refused["data"][1]["fieldViolations"][0]["field"] == "authentication.scheme"
    send = {"message": _message(), "configuration": {"pushNotificationConfig": empty}}
    assert _rpc(as_alice, "message/send", send)["error"]["code"] == -32602
    assert Task.objects.count() == 1
    bare = {"url": "http://127.0.0.1:9/hook", "authentication": {"schemes": []}}
    stored = _rpc(
        as_alice,
        "tasks/pushNotificationConfig/set",
        {"taskId": str(task.id), "pushNotificationConfig": bare},
    )["result"]
    assert "authentication" not in stored["pushNotificationConfig"]
    assert PushNotificationConfig.objects.get().auth_scheme == ""


def test_0_3_params_are_validated(as_alice: FaceClient, agent: Any) -> None:
    body = _rpc(as_alice, "message/send", {"message": {"role": "user"}})
    assert body["error"]["code"] == -32602
    assert Task.objects.count() == 0


@pytest.mark.parametrize(("method", "version"), [("tasks/get", "1.0"), ("GetTask", "0.3")])
def test_a_version_that_does_not_match_the_method_is_refused(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], method: str, version: str
) -> None:
    task = make_task(alice)
    body = _rpc(as_alice, method, {"id": str(task.id)}, **{"A2A-Version": version})
    assert body["error"]["code"] == -32009


def test_0_3_version_header_is_accepted_for_0_3_methods(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    body = _rpc(as_alice, "tasks/get", {"id": str(task.id)}, **{"A2A-Version": "0.3"})
    assert body["result"]["kind"] == "task"


def _stream_body(call: _Call, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async def source() -> AsyncIterator[dict[str, Any]]:
        for event in events:
            yield event

    async def render() -> bytes:
        response = await sse_response(
            source(),
            lambda e: {"jsonrpc": "2.0", "id": 1, "result": call.event(e)},
            dict,
            last=call.ends,
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    return sse_events(asyncio.run(render()))


def test_a_0_3_stream_is_0_3_events_ending_at_the_final_one() -> None:
    task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
    asked = {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "?"}]},
    }
    events = [
        {"task": task},
        {
            "artifactUpdate": {
                "taskId": "t",
                "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"data": [1]}]},
                "lastChunk": True,
            }
        },
        {"statusUpdate": {"taskId": "t", "contextId": "c", "status": asked}},
        {
            "statusUpdate": {
                "taskId": "t",
                "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED"},
            }
        },
    ]
    legacy_events = _stream_body(_Call("message/stream", {"message": _message()}), events)
    results = [e["result"] for e in legacy_events]
    assert [r["kind"] for r in results] == ["task", "artifact-update", "status-update"]
    assert results[0]["status"]["state"] == "working"
    assert results[1]["artifact"]["parts"] == [{"kind": "data", "data": {"value": [1]}}]
    assert results[2]["final"] is True
    assert results[2]["status"]["state"] == "input-required"
    assert results[2]["status"]["message"]["role"] == "agent"
    # 1.0 streams are not cut: every event passes, in 1.0 shape.
    current = _stream_body(
        _Call(
            "SendStreamingMessage",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
        ),
        events,
    )
    assert [e["result"] for e in current] == events
