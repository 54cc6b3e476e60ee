"""Push notification configs over both bindings: create, read, list, delete, their limits
and who may see them. Their delivery: test_push_delivery.py."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from tests.a2a_face.conftest import FaceClient, error_reason
from tests.a2a_face.webhook import Webhook, push_config

# The local webhook is on 127.0.0.1 (refused by default in the distributed mode).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]


def test_configs_can_be_created_read_listed_and_deleted(
    as_alice: FaceClient, task: Task, webhook: Webhook
) -> None:
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    created = as_alice.post(base, push_config(webhook.url, id="cfg-1"))
    assert created.status_code == 200
    assert created.json() == {
        "id": "cfg-1",
        "taskId": str(task.id),
        "url": webhook.url,
        "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    }
    assert as_alice.get(f"{base}/cfg-1").json()["url"] == webhook.url
    listed = as_alice.get(base).json()
    assert [c["id"] for c in listed["configs"]] == ["cfg-1"]
    assert as_alice.delete(f"{base}/cfg-1").status_code == 200
    assert as_alice.delete(f"{base}/cfg-1").status_code == 200  # idempotent
    missing = as_alice.get(f"{base}/cfg-1")
    assert missing.status_code == 404
    assert error_reason(missing) == "TASK_NOT_FOUND"


def test_a_config_without_id_gets_one_and_the_same_id_replaces(
    as_alice: FaceClient, task: Task, webhook: Webhook
) -> None:
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    first = as_alice.post(base, {"url": webhook.url}).json()
    assert first["id"]
    as_alice.post(base, {"url": webhook.url + "2", "id": first["id"]})
    assert PushNotificationConfig.objects.get().url == webhook.url + "2"


def test_configs_over_jsonrpc(as_alice: FaceClient, task: Task, webhook: Webhook) -> None:
    created = as_alice.rpc(
        "CreateTaskPushNotificationConfig", {"taskId": str(task.id), **push_config(webhook.url)}
    ).json()["result"]
    got = as_alice.rpc(
        "GetTaskPushNotificationConfig", {"taskId": str(task.id), "id": created["id"]}
    ).json()["result"]
    assert got == created
    listed = as_alice.rpc("ListTaskPushNotificationConfigs", {"taskId": str(task.id)}).json()
    assert len(listed["result"]["configs"]) == 1
    deleted = as_alice.rpc(
        "DeleteTaskPushNotificationConfig", {"taskId": str(task.id), "id": created["id"]}
    ).json()
    assert "error" not in deleted


def test_configs_are_listed_in_pages_of_the_asked_size(
    as_alice: FaceClient, task: Task, webhook: Webhook
) -> None:
    """ListTaskPushNotificationConfigs has pageSize and pageToken (A2A 1.0): a client
    that pages gets pages, on both bindings, in the order the configs were made."""
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    for n in range(3):
        as_alice.post(base, {"url": webhook.url, "id": f"cfg-{n}"})
    first = as_alice.get(base, {"pageSize": "2"}).json()
    assert [c["id"] for c in first["configs"]] == ["cfg-0", "cfg-1"]
    assert first["nextPageToken"]
    second = as_alice.get(base, {"pageSize": "2", "pageToken": first["nextPageToken"]}).json()
    assert [c["id"] for c in second["configs"]] == ["cfg-2"]
    assert second["nextPageToken"] == ""
    rpc = as_alice.rpc(
        "ListTaskPushNotificationConfigs", {"taskId": str(task.id), "pageSize": 1}
    ).json()["result"]
    assert [c["id"] for c in rpc["configs"]] == ["cfg-0"]
    assert [c["id"] for c in as_alice.get(base).json()["configs"]] == ["cfg-0", "cfg-1", "cfg-2"]


@pytest.mark.parametrize(
    "token", ["nonsense", "WyJjb25maWciLCAiMSJd", "WyJjb25maWciLCAtMV0", "W1tb" * 2000]
)
def test_a_push_config_page_token_not_issued_here_is_invalid_params(
    as_alice: FaceClient, task: Task, token: str
) -> None:
    """A made-up token (or a string or negative position, or kilobytes of ``[`` that made
    the parser recurse) is the client's error, not a 500 or a silently restarted list."""
    response = as_alice.get(
        f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", {"pageToken": token}
    )
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"


@pytest.mark.parametrize(
    "config",
    [
        {"url": "http://127.0.0.1:9/h", "token": "a\r\nX-Evil: 1"},
        {
            "url": "http://127.0.0.1:9/h",
            "authentication": {"scheme": "Bearer", "credentials": "x\ny"},
        },
        {
            "url": "http://127.0.0.1:9/h",
            "authentication": {"scheme": "Bear er", "credentials": "x"},
        },
        {"url": "ftp://127.0.0.1/h"},
        {"url": ""},
    ],
)
def test_bad_configs_are_refused(as_alice: FaceClient, task: Task, config: dict[str, Any]) -> None:
    response = as_alice.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", config)
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"
    assert PushNotificationConfig.objects.count() == 0


def _scheme_refused(error: dict[str, Any]) -> bool:
    """Whether ``error`` (a REST ``error`` or a JSON-RPC one) is INVALID_PARAMS naming
    authentication.scheme."""
    details = error.get("details") or error.get("data")
    violations = [v["field"] for d in details for v in d.get("fieldViolations", [])]
    return details[0]["reason"] == "INVALID_PARAMS" and violations == ["authentication.scheme"]


@pytest.mark.parametrize(
    "authentication", [{"credentials": "hook-secret"}, {"scheme": " ", "credentials": "s"}]
)
def test_authentication_without_a_scheme_is_refused_on_every_path(
    as_alice: FaceClient, task: Task, agent: Any, authentication: dict[str, Any]
) -> None:
    """AuthenticationInfo.scheme is REQUIRED: credentials without one were stored, and
    every POST then went without them (no scheme, no Authorization header)."""
    as_alice.check = False
    config = {"url": "http://127.0.0.1:9/h", "authentication": authentication}
    rest = as_alice.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", config)
    assert rest.status_code == 400
    assert _scheme_refused(rest.json()["error"])
    rpc = as_alice.rpc("CreateTaskPushNotificationConfig", {"taskId": str(task.id), **config})
    assert _scheme_refused(rpc.json()["error"])
    message = {"messageId": "m-auth", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    sent = as_alice.post(
        "/v1/a2a/message:send",
        {
            "message": message,
            "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config},
        },
    )
    assert _scheme_refused(sent.json()["error"])
    assert PushNotificationConfig.objects.count() == 0
    assert Task.objects.count() == 1  # the send created no task


def test_loopback_webhooks_are_refused_unless_allowed(
    as_alice: FaceClient, task: Task, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = False
    settings.ALLOW_PRIVATE_URLS = False
    for url in ("http://127.0.0.1:8080/h", "http://10.1.2.3/h", "http://169.254.169.254/h"):
        response = as_alice.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", {"url": url})
        assert error_reason(response) == "INVALID_PARAMS", url


def test_configs_per_task_are_capped(
    as_alice: FaceClient, task: Task, settings: Any, webhook: Webhook
) -> None:
    settings.A2A_MAX_PUSH_CONFIGS_PER_TASK = 2
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    assert as_alice.post(base, {"url": webhook.url}).status_code == 200
    assert as_alice.post(base, {"url": webhook.url}).status_code == 200
    third = as_alice.post(base, {"url": webhook.url})
    assert error_reason(third) == "INVALID_PARAMS"


def test_configs_of_other_callers_tasks_are_not_found(
    as_bob: FaceClient, task: Task, webhook: Webhook
) -> None:
    response = as_bob.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", {"url": webhook.url})
    assert error_reason(response) == "TASK_NOT_FOUND"
    assert as_bob.get(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs").status_code == 404
