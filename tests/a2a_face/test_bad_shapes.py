"""A value of the wrong kind where a request has an object, and a part that is no Part:
a clear ``INVALID_PARAMS`` naming it, nothing created, on both bindings and in every
dialect. Before, ProtoJSON's reader took a string for a message with no field set: a push
config or a configuration given as a string was a 500 (``INTERNAL``) once the code after
it read it, and ``["hello"]`` or ``[{}]`` as parts made a task that was sent to the agent
and served back, failing every client's read of it (A2A 1.0's schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from a2a.models import Task
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db

M10 = {"role": "ROLE_USER", "parts": [{"text": "x"}], "messageId": "m-1"}
MIX = {"role": "user", "parts": [{"text": "x"}], "messageId": "m-1"}  # FastA2A's
NO_VERSION = {"A2A-Version": ""}  # a 0.3 method's, and FastA2A's


def rpc_error(response: Any) -> dict[str, Any]:
    if response.get("Content-Type", "").startswith("text/event-stream"):
        raw = getattr(response, "streaming_content", None)
        text = (b"".join(raw) if raw is not None else response.content).decode()
        body = json.loads(next(line[6:] for line in text.splitlines() if line.startswith("data: ")))
    else:
        body = response.json()
    return body["error"]


WRONG_KINDS = [
    ("SendMessage", {"message": M10, "configuration": "abc"}, {}),
    (
        "SendMessage",
        {"message": M10, "configuration": {"taskPushNotificationConfig": "abc"}},
        {},
    ),
    (
        "SendMessage",
        {"message": M10, "configuration": {"taskPushNotificationConfig": ["zz"]}},
        {},
    ),
    ("SendMessage", {"message": {**M10, "parts": "x"}}, {}),
    ("SendMessage", {"message": {**M10, "metadata": "x"}}, {}),
    (
        "message/send",
        {"message": MIX, "configuration": {"taskPushNotificationConfig": "abc"}},
        NO_VERSION,
    ),
    (
        "message/stream",
        {"message": MIX, "configuration": {"taskPushNotificationConfig": "abc"}},
        NO_VERSION,
    ),
    ("message/send", {"message": MIX, "configuration": {"blocking": "maybe"}}, NO_VERSION),
]


@pytest.mark.parametrize(("method", "params", "headers"), WRONG_KINDS)
def test_a_wrong_kind_of_value_is_invalid_params_on_json_rpc(
    as_alice: FaceClient, agent: Any, method: str, params: Any, headers: dict[str, str]
) -> None:
    error = rpc_error(as_alice.rpc(method, params, **headers))
    assert error["code"] == -32602, error
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "configuration",
    ["abc", {"taskPushNotificationConfig": "abc"}, {"taskPushNotificationConfig": 5}],
)
def test_a_wrong_kind_of_value_is_400_on_http_json(
    as_alice: FaceClient, agent: Any, configuration: Any
) -> None:
    response = as_alice.post(
        "/v1/a2a/message:send", {"message": M10, "configuration": configuration}
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert not Task.objects.exists()


NO_PARTS = [
    ("SendMessage", {**M10, "parts": ["hello"]}, {}, "message.parts[0]"),
    ("SendMessage", {**M10, "parts": [{}]}, {}, "message.parts[0]"),
    ("SendMessage", {**M10, "parts": [{"text": "a"}, {"metadata": {}}]}, {}, "message.parts[1]"),
    ("message/send", {**MIX, "parts": [{}]}, NO_VERSION, "message.parts[0]"),
    # a 0.3 client's file part without the message's kind: its file was silently dropped
    (
        "message/send",
        {**MIX, "parts": [{"kind": "file", "file": {"bytes": "aGk=", "name": "a.pdf"}}]},
        NO_VERSION,
        "message.parts[0]",
    ),
]


@pytest.mark.parametrize(("method", "message", "headers", "named"), NO_PARTS)
def test_a_part_that_is_no_part_is_refused_naming_it(
    as_alice: FaceClient,
    agent: Any,
    method: str,
    message: dict[str, Any],
    headers: dict[str, str],
    named: str,
) -> None:
    params = {"message": message, "configuration": {"returnImmediately": True}}
    if method == "message/send":
        params["configuration"] = {"blocking": False}
    error = rpc_error(as_alice.rpc(method, params, **headers))
    assert error["code"] == -32602, error
    assert named in error["message"]
    assert not Task.objects.exists()


def test_an_unknown_task_over_0_3_is_0_3s_task_not_found(as_alice: FaceClient) -> None:
    """FastA2A's client takes no other message for -32001 (the id stays in the data)."""
    wanted = "00000000-0000-0000-0000-000000000001"
    error = rpc_error(as_alice.rpc("tasks/get", {"id": wanted}, **NO_VERSION))
    assert (error["code"], error["message"]) == (-32001, "Task not found")
    assert error["data"][0]["metadata"]["taskId"] == wanted
    newer = rpc_error(as_alice.rpc("GetTask", {"id": wanted}))
    assert wanted in newer["message"]  # 1.0's says which
