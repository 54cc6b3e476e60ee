"""The face's push notifications delivered: at least once, in order, retried, disabled
after failures, to the address that was checked; and a config that comes with the send
hears every change of its task."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a.face import push, push_configs, push_repair
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery, PushNotificationConfig
from agent_profiles.urlguard import use_resolver
from tests.a2a_face.conftest import FaceClient, error_reason
from tests.a2a_face.schema import validate
from tests.a2a_face.webhook import Webhook, push_config
from tests.support.trickle import trickling_server

# The local webhook is on 127.0.0.1 (refused by default in the distributed mode).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]


def _configure(task: Task, url: str) -> PushNotificationConfig:
    return push_configs.create_config(task, push_config(url))


def test_a_state_change_is_posted_with_the_auth_and_token_headers(
    task: Task, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    _configure(task, webhook.url)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    headers, body = webhook.received[0]
    assert headers["Authorization"] == "Bearer c"
    assert headers["X-A2A-Notification-Token"] == "tok-1"
    assert body["task"]["id"] == str(task.id)
    assert body["task"]["status"]["state"] == "TASK_STATE_WORKING"
    validate("Stream Response", body)
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    assert delivery.last_status == 200
    assert push.attempt(delivery.pk) == "skipped"  # delivered once is enough


def test_a_configs_deliveries_go_out_in_the_order_of_the_events(
    task: Task,
    webhook: Webhook,
    settings: Any,
    monkeypatch: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.A2A_PUSH_BACKOFF = 0
    webhook.statuses = [500]  # the first POST of the first event fails
    _configure(task, webhook.url)
    started: list[int] = []
    monkeypatch.setattr(push.deliver_push, "delay", started.append)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    with django_capture_on_commit_callbacks(execute=True):
        task.cancel("a person canceled")
    working, canceled = PushDelivery.objects.order_by("seq")
    started.clear()
    # The later event waits while the earlier one is pending, even after a failed try.
    assert push.attempt(working.pk) == DeliveryStatus.PENDING
    assert push.attempt(canceled.pk) == "waiting"
    assert len(webhook.received) == 1  # the failed POST; the later event was not sent
    # The earlier one delivered starts the next; nothing goes out of order.
    assert push.attempt(working.pk) == DeliveryStatus.DELIVERED
    assert started == [canceled.pk]
    assert push.attempt(canceled.pk) == DeliveryStatus.DELIVERED
    states = [body["task"]["status"]["state"] for _, body in webhook.received]
    assert states[-2:] == ["TASK_STATE_WORKING", "TASK_STATE_CANCELED"]


def test_a_failed_post_is_retried_and_recorded(
    task: Task, webhook: Webhook, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.A2A_PUSH_BACKOFF = 0
    webhook.statuses = [500]
    _configure(task, webhook.url)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    assert push.attempt(delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.last_status == 500
    assert delivery.last_error == "HTTP 500"
    assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    delivery.refresh_from_db()
    assert delivery.attempts == 2
    assert PushNotificationConfig.objects.get().consecutive_failures == 0


@pytest.mark.parametrize(
    ("head", "delivered"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", True),  # endless body
        (b"HTTP/1.1 200 OK\r\nX-Slow: ", False),  # headers a byte at a time
    ],
    ids=["body", "headers"],
)
def test_a_webhook_that_answers_a_byte_at_a_time_holds_no_thread(
    task: Task,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    head: bytes,
    delivered: bool,
) -> None:
    """The status is all a delivery needs (the body is never read), and the answer must
    start by its whole deadline: a webhook trickling either held the delivery's thread as
    long as it went on, each byte within the push timeout."""
    settings.A2A_PUSH_TIMEOUT = 0.3
    settings.A2A_PUSH_BACKOFF = 0
    with trickling_server(head, b"x") as peer:
        _configure(task, f"http://127.0.0.1:{peer.port}/hook")
        with django_capture_on_commit_callbacks(execute=True):
            task.start_work()
        delivery = PushDelivery.objects.get()
        outcome = push.attempt(delivery.pk)
        assert peer.hung_up.wait(5)  # it closed the connection, the webhook still sending
    delivery.refresh_from_db()
    if delivered:
        assert (outcome, delivery.last_status) == (DeliveryStatus.DELIVERED, 200)
    else:
        assert outcome == DeliveryStatus.PENDING  # retried later
        assert "deadline" in delivery.last_error


def test_a_config_is_disabled_after_repeated_failures(
    task: Task, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.A2A_PUSH_BACKOFF = 0
    settings.A2A_PUSH_DISABLE_AFTER = 2
    settings.A2A_PUSH_TIMEOUT = 2
    from tests.support.serving import down_url

    config = _configure(task, down_url() + "/hook")
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    push.attempt(delivery.pk)
    assert push.attempt(delivery.pk) == DeliveryStatus.FAILED
    config.refresh_from_db()
    assert config.enabled is False
    assert "repeated failures" in config.disabled_reason
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert "ConnectError" in delivery.last_error


def test_attempts_stop_after_the_maximum(
    task: Task, webhook: Webhook, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.A2A_PUSH_BACKOFF = 0
    settings.A2A_PUSH_MAX_ATTEMPTS = 2
    webhook.statuses = [503, 503, 503]
    _configure(task, webhook.url)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    push.attempt(delivery.pk)
    assert push.attempt(delivery.pk) == DeliveryStatus.FAILED
    assert push.attempt(delivery.pk) == "skipped"
    assert len(webhook.received) == 2


def test_the_sweep_requeues_overdue_deliveries(
    task: Task, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    _configure(task, webhook.url)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    assert push.sweep_push() == 1


def test_disabled_configs_get_no_new_deliveries(
    task: Task, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    config = _configure(task, webhook.url)
    PushNotificationConfig.objects.filter(pk=config.pk).update(enabled=False)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    assert PushDelivery.objects.count() == 0


def _no_dns(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


def test_creating_a_config_needs_no_dns(as_alice: FaceClient, task: Task, settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = False
    base = f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs"
    with use_resolver(_no_dns):
        created = as_alice.post(base, {"url": "https://example.com/a2a/hook"})
        refused = as_alice.post(base, {"url": "http://[::ffff:127.0.0.1]/hook"})
    assert created.status_code == 200, created.content
    assert created.json()["url"] == "https://example.com/a2a/hook"
    assert error_reason(refused) == "INVALID_PARAMS"
    assert PushNotificationConfig.objects.count() == 1


def test_delivery_refuses_a_name_that_resolves_to_loopback(
    task: Task, webhook: Webhook, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = False
    port = webhook.server.server_address[1]
    with use_resolver(_no_dns):
        _configure(task, f"http://hooks.example:{port}/hook")  # looks public: stored
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    with use_resolver(lambda host, p: ["127.0.0.1"]):
        assert push.attempt(delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert "loopback" in delivery.last_error
    assert delivery.last_status is None
    assert webhook.received == []


def test_delivery_goes_to_the_address_that_was_checked(
    task: Task, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    port = webhook.server.server_address[1]
    _configure(task, f"http://hooks.example:{port}/hook")
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    with use_resolver(lambda host, p: ["127.0.0.1"]):
        assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    headers, _body = webhook.received[0]
    assert headers["Host"] == f"hooks.example:{port}"


def test_push_payloads_carry_the_callers_own_ids(
    as_alice: FaceClient, agent: Any, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    message = {
        "messageId": "mine-1",
        "contextId": "my-context",
        "role": "ROLE_USER",
        "parts": [{"text": "hi"}],
    }
    configuration = {"returnImmediately": True, "taskPushNotificationConfig": {"url": webhook.url}}
    sent = as_alice.post(
        "/v1/a2a/message:send", {"message": message, "configuration": configuration}
    ).json()["task"]
    task = Task.objects.get(pk=sent["id"])
    assert task.context_id.endswith(":my-context")  # the agent-side context
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    _headers, body = webhook.received[0]
    assert body["task"]["contextId"] == "my-context"


@pytest.mark.django_db(transaction=True)  # the threads that start tasks see committed rows
def test_a_config_that_comes_with_the_send_hears_how_an_instant_task_ends(
    alice: Any,
    skill: Any,
    make_agent: Callable[..., Any],
    peer: Any,
    webhook: Webhook,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The task is not started before its config is stored: an agent that ends it at once
    cannot end it unheard. (Storing the config waits here for the task's end, as a slow
    request would: the end must come after the config, and be posted.)"""
    from a2a import local_dispatch
    from a2a.states import TaskState

    make_agent(skills=[skill], a2a_endpoint=peer.url)
    create_config = push_configs.create_config

    def late(task: Task, params: dict[str, Any]) -> Any:
        deadline = time.monotonic() + 1.0  # an instant task ends well within this
        while time.monotonic() < deadline:
            if Task.objects.get(pk=task.pk).state == TaskState.COMPLETED:
                break
            time.sleep(0.02)
        return create_config(task, params)

    monkeypatch.setattr(push_configs, "create_config", late)
    local_dispatch.start(1)
    try:
        configuration = {
            "returnImmediately": True,
            "taskPushNotificationConfig": push_config(webhook.url),
        }
        sent = FaceClient(alice.raw_token).post(
            "/v1/a2a/message:send",
            {
                "message": {
                    "messageId": "m-1",
                    "role": "ROLE_USER",
                    "parts": [{"data": {"product": "lamp"}}],
                },
                "configuration": configuration,
            },
        )
        assert sent.status_code == 200, sent.content
        task = Task.objects.get(pk=sent.json()["task"]["id"])
        deadline = time.monotonic() + 10
        while not PushDelivery.objects.filter(config__task=task).exists():
            assert time.monotonic() < deadline, "no push for the task's end"
            time.sleep(0.05)
    finally:
        local_dispatch.stop()
    assert Task.objects.get(pk=task.pk).state == TaskState.COMPLETED


def test_a_change_whose_delivery_was_never_written_is_found_by_the_sweep(
    task: Task, webhook: Webhook, django_capture_on_commit_callbacks: Any
) -> None:
    """The process that moved the task died after its commit, before the receiver wrote
    the delivery (its after-commit callbacks never ran): the sweep writes and sends it,
    once; a config created after the change is not sent it."""
    config = _configure(task, webhook.url)
    with django_capture_on_commit_callbacks(execute=False):
        task.start_work()  # committed; the receiver never runs
    assert PushDelivery.objects.count() == 0
    push.sweep_push()
    assert PushDelivery.objects.count() == 0  # within the grace: the receiver may be late
    past = timezone.now() - timedelta(seconds=push_repair.GRACE_SECONDS + 5)
    Task.objects.filter(pk=task.pk).update(state_changed_at=past)
    PushNotificationConfig.objects.filter(pk=config.pk).update(
        created_at=past - timedelta(seconds=5)
    )
    late = _configure(task, webhook.url.replace("/hook", "/late"))  # after the change

    push.sweep_push()
    push.sweep_push()
    delivery = PushDelivery.objects.get()
    assert delivery.config_id == config.pk
    assert delivery.task_state == "TASK_STATE_WORKING"
    assert push.attempt(delivery.pk) == DeliveryStatus.DELIVERED
    assert webhook.received[0][1]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert not PushDelivery.objects.filter(config=late).exists()
