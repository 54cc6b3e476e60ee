"""Push notifications of configs set over A2A 0.3: their webhooks get what 0.3 servers send
(a2a-sdk 0.3's ``BasePushNotificationSender``): the bare 0.3 Task, no ``A2A-Version``,
the token header. Configs set over 1.0, on the same task, still get 1.0."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from a2a.compat.v0_3 import types as v03

from a2a.face import push, push_configs, sending
from a2a.face.context import CallContext
from a2a.face.jsonrpc import _Call
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery, PushNotificationConfig, PushProtocol
from tests.a2a_face.conftest import FaceClient
from tests.a2a_face.schema import validate
from tests.a2a_face.webhook import Webhook, push_config

# The local webhook is on 127.0.0.1 (refused by default in the distributed mode).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]

V03 = {"A2A-Version": ""}  # 0.3 clients send no version
ARTIFACT = {"artifactId": "result", "name": "verdict", "parts": [{"data": {"verdict": "pass"}}]}


def _config_03(url: str, config_id: str = "h03") -> dict[str, Any]:
    """A 0.3 ``PushNotificationConfig`` with a token and credentials."""
    return {
        "id": config_id,
        "url": url,
        "token": "t03",
        "authentication": {"schemes": ["Bearer"], "credentials": "c03"},
    }


def _message_03(**overrides: Any) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": f"m-{uuid.uuid4().hex[:6]}",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    } | overrides


def _set_03(client: FaceClient, task: Task, config: dict[str, Any]) -> dict[str, Any]:
    body = client.rpc(
        "tasks/pushNotificationConfig/set",
        {"taskId": str(task.id), "pushNotificationConfig": config},
        **V03,
    ).json()
    return body["result"]


def _deliver(callbacks: Callable[..., Any], change: Callable[[], Any]) -> list[PushDelivery]:
    """Make a change (its after-commit receiver run), then POST its new deliveries."""
    before = set(PushDelivery.objects.values_list("pk", flat=True))
    with callbacks(execute=True):
        change()
    new = list(PushDelivery.objects.exclude(pk__in=before).order_by("pk"))
    for delivery in new:
        assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    return new


def _fresh(task: Task) -> Task:
    return Task.objects.get(pk=task.pk)


def test_a_config_set_over_0_3_gets_0_3_tasks(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    webhook: Webhook,
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = make_task(alice)
    stored = _set_03(as_alice, task, _config_03(webhook.url))
    assert stored["pushNotificationConfig"]["id"] == "h03"
    assert PushNotificationConfig.objects.get().protocol_version == PushProtocol.V0_3

    _deliver(django_capture_on_commit_callbacks, lambda: _fresh(task).start_work())
    _deliver(
        django_capture_on_commit_callbacks,
        lambda: _fresh(task).complete({"verdict": "pass"}, [ARTIFACT]),
    )

    (headers, working), (_, completed) = webhook.received
    for body in (working, completed):
        parsed = v03.Task.model_validate(body)  # what a 0.3 webhook does with it
        assert parsed.kind == "task"
        assert parsed.id == str(task.id)
        assert "task" not in body  # not a 1.0 StreamResponse
    assert working["status"]["state"] == "working"
    assert completed["status"]["state"] == "completed"
    assert completed["artifacts"] == [
        {
            "artifactId": "result",
            "name": "verdict",
            "parts": [{"kind": "data", "data": {"verdict": "pass"}}],
        }
    ]
    # The headers of a 0.3 server's POST: the token, and no A2A version.
    assert "A2A-Version" not in headers
    assert headers["X-A2A-Notification-Token"] == "t03"
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer c03"  # the platform's own, as for 1.0


def test_the_body_is_the_0_3_tasks_get_answer_without_history(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    webhook: Webhook,
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = make_task(alice)
    _set_03(as_alice, task, _config_03(webhook.url))
    _deliver(django_capture_on_commit_callbacks, lambda: _fresh(task).start_work())
    got = as_alice.rpc("tasks/get", {"id": str(task.id), "historyLength": 0}, **V03).json()
    assert webhook.received[0][1] == got["result"]


def test_a_0_3_send_with_a_push_config_gets_0_3_tasks(
    as_alice: FaceClient,
    agent: Any,
    webhook: Webhook,
    django_capture_on_commit_callbacks: Any,
) -> None:
    sent = as_alice.rpc(
        "message/send",
        {
            "message": _message_03(contextId="ctx-03"),
            "configuration": {
                "blocking": False,
                "pushNotificationConfig": _config_03(webhook.url),
            },
        },
        **V03,
    ).json()["result"]
    task = Task.objects.get(pk=sent["id"])
    assert PushNotificationConfig.objects.get(task=task).protocol_version == PushProtocol.V0_3

    _deliver(django_capture_on_commit_callbacks, lambda: _fresh(task).start_work())

    headers, body = webhook.received[0]
    parsed = v03.Task.model_validate(body)
    assert parsed.status.state == v03.TaskState.working
    assert body["contextId"] == "ctx-03"  # the caller's own context id
    assert "A2A-Version" not in headers
    assert headers["X-A2A-Notification-Token"] == "t03"


def test_a_0_3_streaming_send_with_a_push_config_gets_0_3_tasks(
    alice: Any,
    agent: Any,
    webhook: Webhook,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """``message/stream`` as the JSON-RPC binding reads it, sent as ``stream_message``
    sends it (reading the stream is the streams' tests' business, not this one's)."""
    call = _Call(
        "message/stream",
        {
            "message": _message_03(),
            "configuration": {"pushNotificationConfig": _config_03(webhook.url)},
        },
    )
    ctx = CallContext(raw_token=alice.raw_token)
    task, _since, _config = sending.send_and_attach(ctx, call.params, streaming=True)
    assert PushNotificationConfig.objects.get(task=task).protocol_version == PushProtocol.V0_3

    _deliver(django_capture_on_commit_callbacks, lambda: _fresh(task).start_work())

    headers, body = webhook.received[0]
    assert v03.Task.model_validate(body).status.state == v03.TaskState.working
    assert "A2A-Version" not in headers


def test_a_1_0_config_on_the_same_task_still_gets_a_stream_response(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    webhook: Webhook,
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = make_task(alice)
    _set_03(as_alice, task, _config_03(webhook.url))
    as_alice.post(
        f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs",
        push_config(webhook.url.replace("/hook", "/hook10"), id="h10"),
    )
    deliveries = _deliver(django_capture_on_commit_callbacks, lambda: _fresh(task).start_work())
    assert len(deliveries) == 2
    by_config = {d.config.config_id: d for d in deliveries}
    # The record keeps the 1.0 state name whatever the payload's version.
    assert {d.task_state for d in deliveries} == {"TASK_STATE_WORKING"}
    assert by_config["h03"].payload["status"]["state"] == "working"

    bodies = {
        headers["X-A2A-Notification-Token"]: (headers, body) for headers, body in webhook.received
    }
    headers_10, body_10 = bodies["tok-1"]
    validate("Stream Response", body_10)
    assert body_10["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert headers_10["A2A-Version"] == "1.0"
    headers_03, body_03 = bodies["t03"]
    v03.Task.model_validate(body_03)
    assert "A2A-Version" not in headers_03


def test_a_0_3_client_reads_its_config_back_unchanged(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], webhook: Webhook
) -> None:
    task = make_task(alice)
    config = _config_03(webhook.url)
    expected = {"taskId": str(task.id), "pushNotificationConfig": config}
    assert _set_03(as_alice, task, config) == expected
    got = as_alice.rpc(
        "tasks/pushNotificationConfig/get",
        {"id": str(task.id), "pushNotificationConfigId": "h03"},
        **V03,
    ).json()["result"]
    assert got == expected
    listed = as_alice.rpc("tasks/pushNotificationConfig/list", {"id": str(task.id)}, **V03)
    assert listed.json()["result"] == [expected]


def test_the_version_follows_the_method_that_last_set_the_config(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], webhook: Webhook
) -> None:
    task = make_task(alice)
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    # A 1.0 client cannot ask for 0.3 payloads: the mark is no field of the request.
    as_alice.post(base, push_config(webhook.url, id="h", **{"@protocolVersion": "0.3"}))
    assert PushNotificationConfig.objects.get().protocol_version == PushProtocol.V1_0
    _set_03(as_alice, task, _config_03(webhook.url, config_id="h"))
    assert PushNotificationConfig.objects.get().protocol_version == PushProtocol.V0_3
    as_alice.post(base, push_config(webhook.url, id="h"))
    assert PushNotificationConfig.objects.get().protocol_version == PushProtocol.V1_0


def test_configs_stored_directly_are_1_0(alice: Any, make_task: Callable[..., Task]) -> None:
    """Configs from before the field (and from any 1.0 path) are 1.0's."""
    config = push_configs.create_config(make_task(alice), push_config("http://127.0.0.1:9/hook"))
    assert config.protocol_version == PushProtocol.V1_0
    assert push._headers(config)["A2A-Version"] == "1.0"
