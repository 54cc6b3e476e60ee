"""The JSON-RPC binding: same handler, JSON-RPC error codes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.models import Task
from agent_profiles.models import AgentProfile, AgentStatus
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    return body["error"]


def test_get_task_returns_the_bare_task(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    response = as_alice.rpc("GetTask", {"id": str(task.id), "historyLength": 0})
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == "1"
    assert body["result"]["id"] == str(task.id)
    assert "history" not in body["result"]


def test_list_tasks_shares_the_rest_behaviour(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    make_task(alice)
    result = as_alice.rpc("ListTasks", {"pageSize": 1}).json()["result"]
    assert result["totalSize"] == 1
    assert result["nextPageToken"] == ""


def test_unknown_task_is_minus_32001(as_alice: FaceClient) -> None:
    error = _error(as_alice.rpc("GetTask", {"id": "00000000-0000-0000-0000-000000000000"}))
    assert error["code"] == -32001
    assert error["data"][0]["reason"] == "TASK_NOT_FOUND"


def test_cancel_of_a_finished_task_is_minus_32002(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.cancel()
    assert _error(as_alice.rpc("CancelTask", {"id": str(task.id)}))["code"] == -32002


def test_subscribe_to_a_finished_task_is_minus_32004_before_any_stream(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.cancel()
    response = as_alice.rpc("SubscribeToTask", {"id": str(task.id)})
    assert response["Content-Type"] == "application/json"
    assert _error(response)["code"] == -32004


def test_unknown_method_is_minus_32601(as_alice: FaceClient) -> None:
    response = as_alice.rpc("tasks/fetch")
    assert response.status_code == 200
    assert _error(response)["code"] == -32601


def test_bad_json_is_minus_32700(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/jsonrpc", "{", content_type="application/json")
    assert _error(response)["code"] == -32700


def test_a_non_2_0_envelope_is_minus_32600(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/jsonrpc", {"jsonrpc": "1.0", "id": 1, "method": "GetTask"})
    error = _error(response)
    assert error["code"] == -32600
    assert response.json()["id"] == 1


def test_params_that_are_not_an_object_are_minus_32602(as_alice: FaceClient) -> None:
    response = as_alice.post(
        "/v1/a2a/jsonrpc", {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": [1]}
    )
    assert _error(response)["code"] == -32602


def test_bad_list_params_are_minus_32602(as_alice: FaceClient) -> None:
    assert _error(as_alice.rpc("ListTasks", {"pageSize": 500}))["code"] == -32602


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("GetTask", {}, "id"),
        ("CancelTask", {"id": ""}, "id"),
        ("SubscribeToTask", {}, "id"),
        ("ListTaskPushNotificationConfigs", {}, "taskId"),
        ("CreateTaskPushNotificationConfig", {"url": "https://example.com/hook"}, "taskId"),
        ("GetTaskPushNotificationConfig", {"taskId": "TASK"}, "id"),
        ("DeleteTaskPushNotificationConfig", {"taskId": "TASK"}, "id"),
        ("DeleteTaskPushNotificationConfig", {"id": "cfg"}, "taskId"),
    ],
)
def test_a_missing_required_id_is_minus_32602_naming_it(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    method: str,
    params: dict[str, Any],
    field: str,
) -> None:
    """Read as optional, a missing task id was looked up as the task "None" (-32001), a
    missing config id as "" (-32001), and a delete without one answered success."""
    task = make_task(alice)
    params = {k: str(task.id) if v == "TASK" else v for k, v in params.items()}
    error = _error(as_alice.rpc(method, params))
    assert error["code"] == -32602
    assert error["data"][1]["fieldViolations"] == [{"field": field, "description": "required"}]


def test_unsupported_version_is_minus_32009(as_alice: FaceClient) -> None:
    response = as_alice.rpc("ListTasks", **{"A2A-Version": "0.3"})
    assert _error(response)["code"] == -32009


def test_non_json_content_type_is_minus_32005_with_415(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/jsonrpc", "x", content_type="text/plain")
    assert response.status_code == 415
    assert _error(response)["code"] == -32005


def test_get_is_refused_with_405(as_alice: FaceClient) -> None:
    response = as_alice.get("/v1/a2a/jsonrpc")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == -32601


def test_missing_credentials_are_401(db: None) -> None:
    response = FaceClient(None).rpc("ListTasks")
    assert response.status_code == 401
    assert _error(response)["data"][0]["reason"] == "UNAUTHENTICATED"


def test_the_tenant_endpoint_scopes_to_its_agent(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    found = as_alice.rpc("GetTask", {"id": str(task.id)}, path="/v1/a2a/agent-one/jsonrpc")
    assert found.json()["result"]["id"] == str(task.id)
    missing = as_alice.rpc("GetTask", {"id": str(task.id)}, path="/v1/a2a/agent-two/jsonrpc")
    assert _error(missing)["code"] == -32001
    by_param = as_alice.rpc("GetTask", {"id": str(task.id), "tenant": "agent-two"})
    assert _error(by_param)["code"] == -32001


def test_listing_a_tenant_that_names_no_agent_is_agent_not_found(
    as_alice: FaceClient, alice: Any, agent: Any, make_task: Callable[..., Task]
) -> None:
    """Both bindings; before, an empty page, as if the agent were there. A disabled
    agent's route still lists the caller's tasks there."""
    rest = as_alice.get("/v1/a2a/nobody-here/tasks")
    assert rest.status_code == 404
    assert error_reason(rest) == "AGENT_NOT_FOUND"
    rpc = as_alice.rpc("ListTasks", {}, path="/v1/a2a/nobody-here/jsonrpc")
    assert _error(rpc)["data"][0]["reason"] == "AGENT_NOT_FOUND"
    task = make_task(alice)
    AgentProfile.objects.filter(pk=agent.pk).update(status=AgentStatus.DISABLED)
    listed = as_alice.get(f"/v1/a2a/{agent.pk}/tasks")
    assert [t["id"] for t in listed.json()["tasks"]] == [str(task.id)]


def test_the_interface_url_takes_json_rpc_posts(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    """Clients given only a URL post JSON-RPC to it (Microsoft Agent Framework's
    ``A2AAgent(url=...)``): the HTTP+JSON interface's own URL, default or an agent's, takes
    JSON-RPC posts; its other methods and the operations under it stay HTTP+JSON."""
    task = make_task(alice)
    for path in ("/v1/a2a", "/v1/a2a/", "/v1/a2a/agent-one", "/v1/a2a/agent-one/"):
        found = as_alice.rpc("GetTask", {"id": str(task.id)}, path=path)
        assert found.json()["result"]["id"] == str(task.id), path
    missing = as_alice.rpc("GetTask", {"id": str(task.id)}, path="/v1/a2a/agent-two")
    assert _error(missing)["code"] == -32001
    assert _error(as_alice.post("/v1/a2a", "{", content_type="application/json"))["code"] == (
        -32700
    )
    assert _error(as_alice.rpc("tasks/fetch", path="/v1/a2a"))["code"] == -32601
    not_here = as_alice.get("/v1/a2a")
    assert not_here.status_code == 404
    assert not_here.json()["error"]["details"][0]["reason"] == "METHOD_NOT_FOUND"
    assert as_alice.get("/v1/a2a/tasks").json()["tasks"][0]["id"] == str(task.id)


def test_the_sdk_client_maps_our_jsonrpc_errors() -> None:
    import httpx
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.types.a2a_pb2 import AgentCard
    from a2a.utils.errors import TaskNotCancelableError

    from a2a.face.errors import TaskNotCancelable, jsonrpc_error_body

    transport = JsonRpcTransport(httpx.AsyncClient(), AgentCard(), "http://x")
    body = jsonrpc_error_body(TaskNotCancelable("done", metadata={"taskId": "t"}), "1")
    with pytest.raises(TaskNotCancelableError):
        transport._check_jsonrpc_response(body)
