"""What the transports read and write without a peer: JSON-RPC error codes, 0.3 spellings
both ways, stream events folded into a task, and tenants."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.exceptions import (
    A2APermanentError,
    A2AProtocolError,
    A2ATransientError,
    A2AUnsupportedOperation,
)
from a2a.transports import shapes, stream_view, transport_for
from a2a.transports.base import send_params
from a2a.transports.jsonrpc import JsonRpcTransport, rpc_error
from a2a.transports.rest import RestTransport
from agent_profiles.interfaces import CallTarget


@pytest.mark.parametrize(
    ("code", "kind", "platform_code"),
    [
        (-32001, A2APermanentError, "remote_task_not_found"),
        (-32004, A2AUnsupportedOperation, "unsupported_operation"),
        (-32601, A2AUnsupportedOperation, "unsupported_operation"),
        (-32009, A2APermanentError, "version_not_supported"),
        (-32602, A2APermanentError, "agent_refused"),
        (-32603, A2ATransientError, "agent_error"),
    ],
)
def test_json_rpc_error_codes_map_to_platform_errors(
    code: int, kind: type, platform_code: str
) -> None:
    error = rpc_error("a1", "GetTask", {"code": code, "message": "nope"})
    assert isinstance(error, kind)
    assert error.code == platform_code
    assert "a1" in error.message
    assert str(code) in error.message


def test_a_malformed_json_rpc_error_is_a_protocol_error() -> None:
    assert isinstance(rpc_error("a1", "GetTask", {"code": "x"}), A2AProtocolError)


def test_an_answer_for_another_request_is_refused() -> None:
    transport = JsonRpcTransport(CallTarget(agent_id="a1", url="http://x", binding="JSONRPC"))
    with pytest.raises(A2AProtocolError, match="another request"):
        transport._result({"jsonrpc": "2.0", "id": "other", "result": {}}, "mine", "GetTask")
    with pytest.raises(A2AProtocolError, match="without a result"):
        transport._result({"jsonrpc": "2.0", "id": "mine"}, "mine", "GetTask")


def test_a_03_task_reads_as_10() -> None:
    task = {
        "kind": "task",
        "id": "t1",
        "status": {
            "state": "input-required",
            "message": {
                "kind": "message",
                "role": "agent",
                "parts": [{"kind": "text", "text": "EU?"}],
                "messageId": "m1",
            },
        },
        "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"v": 1}}]}],
    }
    read = shapes.read_task_answer(task, v03=True, rest=False, what="x")
    assert read["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert read["status"]["message"]["role"] == "ROLE_AGENT"
    assert read["artifacts"][0]["parts"] == [{"data": {"v": 1}}]


def test_a_03_rest_task_reads_as_10() -> None:
    task = {
        "id": "t1",
        "status": {"state": "TASK_STATE_CANCELLED"},
        "artifacts": [{"artifactId": "a", "parts": [{"data": {"data": {"v": 1}}}]}],
    }
    read = shapes.read_task_answer({"task": task}, v03=True, rest=True, what="x")
    assert read["status"]["state"] == "TASK_STATE_CANCELED"
    assert read["artifacts"][0]["parts"] == [{"data": {"v": 1}}]


def test_our_message_is_written_in_03_spelling() -> None:
    message: dict[str, Any] = {
        "messageId": "m",
        "role": "ROLE_USER",
        "parts": [{"text": "hi"}, {"data": {"x": 1}}],
    }
    rpc = shapes.message_to_03(message, rest=False)
    assert (rpc["kind"], rpc["role"]) == ("message", "user")
    assert rpc["parts"] == [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"x": 1}}]
    rest = shapes.message_to_03(message, rest=True)
    assert rest["role"] == "ROLE_USER"
    assert rest["content"] == [{"text": "hi"}, {"data": {"data": {"x": 1}}}]


@pytest.mark.parametrize(
    ("v03", "rest", "field"),
    [
        (False, True, "taskPushNotificationConfig"),
        (False, False, "taskPushNotificationConfig"),
        (True, False, "pushNotificationConfig"),  # the 0.3 JSON-RPC schema's name
        (True, True, "pushNotification"),  # the 0.3 proto's, which HTTP+JSON agents parse
    ],
)
def test_a_sends_push_config_has_each_bindings_and_versions_name(
    v03: bool, rest: bool, field: str
) -> None:
    push = {
        "url": "https://platform.example/api/a2a/push/t/1",
        "token": "per-task-token",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    }
    message: dict[str, Any] = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    configuration = send_params(message, blocking=False, v03=v03, rest=rest, push=push)[
        "configuration"
    ]
    names = {"returnImmediately", "blocking", field}
    assert set(configuration) <= names
    assert field in configuration
    sent = configuration[field]
    assert (sent["url"], sent["token"]) == (push["url"], "per-task-token")
    if v03:
        assert sent["authentication"] == {"schemes": ["Bearer"], "credentials": "c"}


def test_stream_events_fold_into_one_task() -> None:
    view = stream_view.StreamView()
    assert view.apply("status", {"taskId": "t", "status": {"state": "working"}})["status"] == {
        "state": "TASK_STATE_WORKING"
    }
    view.apply("artifact", {"taskId": "t", "artifact": {"artifactId": "a", "parts": [1]}})
    task = view.apply(
        "artifact", {"taskId": "t", "append": True, "artifact": {"artifactId": "a", "parts": [2]}}
    )
    assert task["artifacts"] == [{"artifactId": "a", "parts": [1, 2]}]


def test_a_10_stream_with_03_update_events_is_read() -> None:
    """LangGraph's server streams a 1.0 ``task`` first, then 0.3's ``kind``-tagged
    updates as they are: read, not refused as "not a StreamResponse"."""
    events = [
        {"task": {"kind": "task", "id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}},
        {
            "taskId": "t",
            "kind": "artifact-update",
            "artifact": {
                "artifactId": "i",
                "name": "Interrupt",
                "parts": [{"kind": "data", "data": {"value": "EU?"}}],
            },
        },
        {
            "taskId": "t",
            "kind": "status-update",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"kind": "message", "role": "agent", "parts": []},
            },
            "final": True,
        },
    ]
    view = stream_view.StreamView()
    for event in events:
        task = view.apply(*shapes.read_stream_event(event, v03=False, rest=False))
    assert task is not None
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    assert task["artifacts"][0]["parts"] == [{"data": {"value": "EU?"}}]
    with pytest.raises(A2AProtocolError):
        shapes.read_stream_event({"taskId": "t", "kind": "weather"}, v03=False, rest=False)


def test_artifacts_streamed_before_any_status_are_held_only_up_to_the_cap(
    settings: Any,
) -> None:
    """They are applied (and capped with the task's) once a status comes; until then the
    stream's view holds them, so it refuses to hold more than the cap."""
    settings.TASK_ARTIFACTS_MAX_BYTES = 500
    view = stream_view.StreamView()
    chunk = {"artifactId": "a", "parts": [{"text": "x" * 200}]}
    assert view.apply("artifact", {"taskId": "t", "artifact": chunk}) is None
    assert view.apply("artifact", {"taskId": "t", "append": True, "artifact": chunk}) is None
    with pytest.raises(A2AProtocolError) as refused:
        view.apply("artifact", {"taskId": "t", "append": True, "artifact": chunk})
    assert refused.value.code == "artifacts_too_large"
    assert refused.value.details["maxBytes"] == 500


def test_a_tenant_is_a_path_prefix_over_http_json_and_a_param_over_json_rpc() -> None:
    rest = RestTransport(CallTarget(agent_id="a", url="http://x/a2a/", tenant="acme"))
    assert rest._base() == "http://x/a2a/acme"
    rest03 = RestTransport(CallTarget(agent_id="a", url="http://x", version="0.3"))
    assert rest03._base() == "http://x/v1"
    rpc = JsonRpcTransport(
        CallTarget(agent_id="a", url="http://x", binding="JSONRPC", tenant="acme")
    )
    _, body = rpc._request("get_task", {"id": "t"})
    assert (body["method"], body["params"]["tenant"]) == ("GetTask", "acme")


def test_an_interface_the_platform_does_not_speak_is_refused() -> None:
    with pytest.raises(A2APermanentError, match="does not speak"):
        transport_for(CallTarget(agent_id="a", binding="GRPC", url="http://x"))
