"""What an independent A2A 1.0 client sends, raw: trailing slashes, proto field names,
unknown fields, query strings, content types and versions; a Message answer; callers' ids
kept apart toward agents. Every answer is also checked against the 1.0 JSON schema by the
test client (see tests/a2a_face/schema.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from a2a.agent_updates import apply_agent_reply
from a2a.face import sending
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from tests.a2a_face.conftest import FaceClient, error_reason
from tests.a2a_face.schema import validate

pytestmark = pytest.mark.django_db


def _message(**overrides: Any) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4().hex[:8]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
    } | overrides


@pytest.fixture
def task(alice: Any, make_task: Callable[..., Task]) -> Task:
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [{"artifactId": "a1", "parts": [{"data": {"v": 1}}]}])
    return task


# --- the JSON-RPC URL -----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/a2a/jsonrpc/", "/v1/a2a/agent-one/jsonrpc/"])
def test_the_jsonrpc_url_takes_a_trailing_slash(
    as_alice: FaceClient, task: Task, path: str
) -> None:
    response = as_alice.rpc("GetTask", {"id": str(task.id)}, path=path)
    assert response.status_code == 200
    assert response.json()["result"]["id"] == str(task.id)


@pytest.mark.parametrize(
    "path", ["/v1/a2a/jsonrpc/x", "/v1/a2a/jsonrpc/v1/message:send", "/v1/a2a/agent-one/jsonrpc/y"]
)
def test_below_the_jsonrpc_url_every_answer_is_a_jsonrpc_envelope(
    as_alice: FaceClient, path: str
) -> None:
    response = as_alice.post(path, {"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
    assert response.status_code == 404
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == -32601


def test_a_get_on_the_jsonrpc_url_is_a_jsonrpc_405(as_alice: FaceClient) -> None:
    response = as_alice.get("/v1/a2a/jsonrpc/")
    assert response.status_code == 405
    assert set(response.json()) == {"jsonrpc", "id", "error"}


# --- ProtoJSON names, unknown fields, query strings ----------------------------------


def test_jsonrpc_takes_proto_field_names(as_alice: FaceClient, task: Task) -> None:
    result = as_alice.rpc("GetTask", {"id": str(task.id), "history_length": 0}).json()["result"]
    assert "history" not in result
    listed = as_alice.rpc(
        "ListTasks",
        {
            "context_id": task.context_id,
            "page_size": 1,
            "include_artifacts": True,
            "status": "TASK_STATE_COMPLETED",
            "status_timestamp_after": "2000-01-01T00:00:00Z",
        },
    ).json()["result"]
    assert [t["id"] for t in listed["tasks"]] == [str(task.id)]
    assert listed["pageSize"] == 1
    assert listed["tasks"][0]["artifacts"][0]["artifactId"] == "a1"
    other = as_alice.rpc("ListTasks", {"context_id": "not-this-one"}).json()["result"]
    assert other["tasks"] == []


def test_push_methods_take_the_flattened_config_in_proto_names(
    as_alice: FaceClient, task: Task, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    created = as_alice.rpc(
        "CreateTaskPushNotificationConfig",
        {
            "task_id": str(task.id),
            "id": "hook-1",
            "url": "http://127.0.0.1:9/hook",
            "token": "t",
            "authentication": {"scheme": "Bearer", "credentials": "c"},
        },
    ).json()["result"]
    assert created["taskId"] == str(task.id)
    assert created["id"] == "hook-1"
    got = as_alice.rpc(
        "GetTaskPushNotificationConfig", {"task_id": str(task.id), "id": "hook-1"}
    ).json()["result"]
    assert got["url"] == "http://127.0.0.1:9/hook"
    listed = as_alice.rpc("ListTaskPushNotificationConfigs", {"task_id": str(task.id)})
    assert len(listed.json()["result"]["configs"]) == 1
    as_alice.rpc("DeleteTaskPushNotificationConfig", {"task_id": str(task.id), "id": "hook-1"})
    assert PushNotificationConfig.objects.count() == 0


def test_rest_query_strings_take_proto_names_and_string_values(
    as_alice: FaceClient, task: Task
) -> None:
    got = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"history_length": "0"}).json()
    assert "history" not in got
    listed = as_alice.get(
        "/v1/a2a/tasks",
        {"context_id": task.context_id, "page_size": "1", "include_artifacts": "false"},
    ).json()
    assert listed["pageSize"] == 1
    assert "artifacts" not in listed["tasks"][0]
    with_artifacts = as_alice.get("/v1/a2a/tasks", {"includeArtifacts": "true"}).json()
    assert with_artifacts["tasks"][0]["artifacts"]


def test_unknown_fields_are_ignored_on_both_bindings(as_alice: FaceClient, agent: Any) -> None:
    body = {
        "message": _message(futureField={"x": 1}),
        "configuration": {"returnImmediately": True, "somethingNew": True},
        "extension_data": [1, 2],
    }
    assert as_alice.post("/v1/a2a/message:send", body).status_code == 200
    result = as_alice.rpc("SendMessage", body).json()["result"]
    assert result["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert "futureField" not in Task.objects.get(pk=result["task"]["id"]).outbound_message


def test_a_send_in_proto_names_relays_json_names(as_alice: FaceClient, agent: Any) -> None:
    body = {
        "message": {
            "message_id": "m-snake",
            "role": "ROLE_USER",
            "parts": [{"text": "hi", "media_type": "text/plain"}],
            "context_id": "ctx-snake",
        },
        "configuration": {"return_immediately": True, "history_length": 0},
    }
    result = as_alice.rpc("SendMessage", body).json()["result"]["task"]
    assert result["contextId"] == "ctx-snake"
    assert "history" not in result
    relayed = Task.objects.get(pk=result["id"]).outbound_message
    assert relayed["messageId"].endswith(":m-snake")
    assert relayed["parts"] == [{"text": "hi", "mediaType": "text/plain"}]


def test_values_in_data_parts_are_kept_exactly(as_alice: FaceClient, agent: Any) -> None:
    data = {"product": "kettle", "count": 1, "ratio": 0.5, "big": 12345678901234567}
    data["nested"] = [{"a": None}]
    body = {
        "message": _message(parts=[{"data": data}]),
        "configuration": {"returnImmediately": True},
    }
    result = as_alice.post("/v1/a2a/message:send", body).json()
    task = Task.objects.get(pk=result["task"]["id"])
    assert task.outbound_message["parts"][0]["data"] == data
    assert isinstance(task.outbound_message["parts"][0]["data"]["count"], int)


def test_a_field_of_the_wrong_type_is_invalid_params(as_alice: FaceClient, task: Task) -> None:
    response = as_alice.rpc("GetTask", {"id": str(task.id), "historyLength": "many"})
    assert response.json()["error"]["code"] == -32602
    rest = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": "many"})
    assert error_reason(rest) == "INVALID_PARAMS"


# --- content types and versions --------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_wrong_content_types_are_refused_on_both_bindings(
    as_alice: FaceClient, content_type: str
) -> None:
    rest = as_alice.post("/v1/a2a/message:send", "{}", content_type=content_type)
    assert rest.status_code == 415
    assert error_reason(rest) == "CONTENT_TYPE_NOT_SUPPORTED"
    rpc = as_alice.post("/v1/a2a/jsonrpc/", "{}", content_type=content_type)
    assert rpc.json()["error"]["code"] == -32005


def test_a_jsonrpc_parse_error_is_minus_32700_with_http_200(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/jsonrpc", "{nope", content_type="application/json")
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize("version", ["", "1.0", "1"])
def test_an_empty_or_1x_version_is_served_where_the_method_tells(
    as_alice: FaceClient, task: Task, version: str
) -> None:
    assert as_alice.get(f"/v1/a2a/tasks/{task.id}", **{"A2A-Version": version}).status_code == 200
    rpc = as_alice.rpc("GetTask", {"id": str(task.id)}, **{"A2A-Version": version})
    assert "result" in rpc.json()


@pytest.mark.parametrize("version", ["99.0", "0.3", "1" * 5000, "1.0; drop", "v1"])
def test_an_unsupported_version_is_version_not_supported(
    as_alice: FaceClient, task: Task, version: str
) -> None:
    rest = as_alice.get(f"/v1/a2a/tasks/{task.id}", **{"A2A-Version": version})
    assert rest.status_code == 400
    assert error_reason(rest) == "VERSION_NOT_SUPPORTED"
    rpc = as_alice.rpc("GetTask", {"id": str(task.id)}, **{"A2A-Version": version})
    assert rpc.json()["error"]["code"] == -32009


def test_the_version_may_come_as_a_query_parameter(as_alice: FaceClient, task: Task) -> None:
    client = FaceClient(as_alice.headers["Authorization"].split()[1])
    client.headers.pop("A2A-Version")
    assert client.get(f"/v1/a2a/tasks/{task.id}?A2A-Version=1.0").status_code == 200
    refused = client.get(f"/v1/a2a/tasks/{task.id}?A2A-Version=99.0")
    assert error_reason(refused) == "VERSION_NOT_SUPPORTED"


# --- a Message answer stays a Message --------------------------------------------------


def test_an_agents_bare_message_is_the_answer_the_client_gets(
    as_alice: FaceClient, agent: Any
) -> None:
    sent = as_alice.post(
        "/v1/a2a/message:send",
        {"message": _message(contextId="talk"), "configuration": {"returnImmediately": True}},
    ).json()["task"]
    task = Task.objects.get(pk=sent["id"])
    # The dispatcher's one entry point for an agent's answer, here a bare Message.
    reply = {
        "messageId": "agent-m-1",
        "role": "ROLE_AGENT",
        "contextId": "agent-side-ctx",
        "parts": [{"data": {"verdict": "pass"}}],
    }
    apply_agent_reply(task, task_json=None, message=reply, via="a2a")
    answer = sending._answer(task.id, None)
    assert set(answer) == {"message"}
    validate("Send Message Response", answer)
    assert answer["message"]["messageId"] == "agent-m-1"
    assert answer["message"]["contextId"] == "talk"
    assert answer["message"]["parts"] == [{"data": {"verdict": "pass"}}]
    # GetTask still shows the task the platform recorded.
    assert as_alice.get(f"/v1/a2a/tasks/{task.id}").json()["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_a_task_answer_stays_a_task(alice: Any, make_task: Callable[..., Task]) -> None:
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [{"artifactId": "result", "parts": [{"data": {}}]}])
    assert set(sending._answer(task.id, None)) == {"task"}


# --- callers' ids toward agents --------------------------------------------------------


def test_two_callers_with_the_same_ids_reach_the_agent_with_different_ids(
    as_alice: FaceClient, as_bob: FaceClient, agent: Any
) -> None:
    def send(client: FaceClient, message_id: str) -> dict[str, Any]:
        body = {
            "message": _message(messageId=message_id, contextId="session-1"),
            "configuration": {"returnImmediately": True},
        }
        return client.post("/v1/a2a/message:send", body).json()["task"]

    alice_first, bob_first = send(as_alice, "same-mid-1"), send(as_bob, "same-mid-1")
    alice_second = send(as_alice, "mid-2")
    relayed = {
        name: Task.objects.get(pk=t["id"]).outbound_message
        for name, t in (("a1", alice_first), ("b1", bob_first), ("a2", alice_second))
    }
    assert relayed["a1"]["messageId"] != relayed["b1"]["messageId"]
    assert relayed["a1"]["contextId"] != relayed["b1"]["contextId"]
    # One caller's conversation stays one context at the agent.
    assert relayed["a1"]["contextId"] == relayed["a2"]["contextId"]
    # Each caller sees its own ids, and lists its own context.
    for seen in (alice_first, bob_first):
        assert seen["contextId"] == "session-1"
        assert seen["history"][0]["messageId"] == "same-mid-1"
    listed = as_alice.get("/v1/a2a/tasks", {"contextId": "session-1"}).json()["tasks"]
    assert sorted(t["id"] for t in listed) == sorted([alice_first["id"], alice_second["id"]])


def test_a_client_id_too_long_for_the_namespace_is_refused(
    as_alice: FaceClient, agent: Any
) -> None:
    body = {"message": _message(contextId="c" * 500), "configuration": {"returnImmediately": True}}
    response = as_alice.post("/v1/a2a/message:send", body)
    assert error_reason(response) == "INVALID_PARAMS"
    assert Task.objects.count() == 0


# --- the schema check itself ------------------------------------------------------------


def test_the_schema_check_refuses_0_3_leftovers() -> None:
    task = {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}
    validate("Task", task)
    with pytest.raises(jsonschema.ValidationError):
        validate("Task", {**task, "kind": "task"})
    with pytest.raises(jsonschema.ValidationError):
        validate("Task", {"id": "t", "status": {"state": "working"}})
    with pytest.raises(AssertionError):
        validate("Task", {"id": "t", "status": {"state": "TASK_STATE_WORKING", "timestamp": "x"}})


def test_a_jsonrpc_batch_is_an_invalid_request(as_alice: FaceClient) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}]
    response = as_alice.post("/v1/a2a/jsonrpc", batch)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32600


def test_callers_ids_read_right_after_a_secret_key_change(
    as_alice: FaceClient, agent: Any, settings: Any
) -> None:
    body = {
        "message": _message(messageId="mine", contextId="ctx-kept"),
        "configuration": {"returnImmediately": True},
    }
    task_id = as_alice.post("/v1/a2a/message:send", body).json()["task"]["id"]
    settings.SECRET_KEY = "rotated-" + settings.SECRET_KEY
    seen = as_alice.get(f"/v1/a2a/tasks/{task_id}").json()
    assert seen["contextId"] == "ctx-kept"
    assert seen["history"][0]["messageId"] == "mine"
