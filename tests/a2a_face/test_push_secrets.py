"""A push config's token and credentials are secrets that go out as header values: one
that cannot (a trailing space, a form feed, a non-ASCII letter) is refused when it is
stored, never quoted; one stored before is never quoted either when its POST fails. And
no header an answer echoes reaches the log at DEBUG (httpcore's lines quote them all)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from a2a.face import push, push_configs
from a2a.face.errors import InvalidParams
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery, PushNotificationConfig
from tests.a2a_face.webhook import Webhook, push_config

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]

SECRET = "HUNTSECRET-0123456789"
UNSENDABLE = [f"{SECRET} ", f" {SECRET}", f"{SECRET}\x0b", f"{SECRET}\x0c", f"{SECRET}é"]


@pytest.mark.parametrize("value", UNSENDABLE)
@pytest.mark.parametrize("field", ["token", "credentials"])
def test_an_unsendable_secret_is_refused_unquoted(task: Task, field: str, value: str) -> None:
    params = push_config("http://127.0.0.1:9/hook")
    if field == "token":
        params["token"] = value
    else:
        params["authentication"] = {"scheme": "Bearer", "credentials": value}
    with pytest.raises(InvalidParams) as refused:
        push_configs.create_config(task, params)
    assert SECRET not in str(refused.value)
    assert PushNotificationConfig.objects.count() == 0


def test_a_secret_with_inner_spaces_is_a_header_value(task: Task) -> None:
    params = push_config("http://127.0.0.1:9/hook")
    params["authentication"] = {"scheme": "Digest", "credentials": 'username="a", nonce="b"'}
    assert push_configs.create_config(task, params).auth_credentials.startswith("username")


@pytest.mark.parametrize("value", [f"{SECRET} ", f"{SECRET}é"])
def test_a_stored_unsendable_secret_fails_its_post_unquoted(
    task: Task,
    webhook: Webhook,
    value: str,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Stored before configs were checked: its POST fails as an attempt, recorded with
    the error's kind only (h11 quoted the whole header; a non-ASCII one raised past the
    record, and the delivery stayed pending for good)."""
    config = push_configs.create_config(task, push_config(webhook.url))
    PushNotificationConfig.objects.filter(pk=config.pk).update(token=value)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    with caplog.at_level(logging.DEBUG):
        assert push.attempt(delivery.pk) == DeliveryStatus.PENDING  # retried later
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    assert "cannot be sent" in delivery.last_error
    assert SECRET not in delivery.last_error
    assert SECRET not in caplog.text
    assert webhook.received == []


def test_headers_an_answer_echoes_stay_out_of_the_log_at_debug(
    task: Task,
    webhook: Webhook,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A webhook (a debug proxy) that echoes the token in its answer's headers: at
    DEBUG, httpcore logged every header of every answer."""
    webhook.echo = True
    params = {**push_config(webhook.url), "token": SECRET}
    push_configs.create_config(task, params)
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    with caplog.at_level(logging.DEBUG):
        assert push.attempt(PushDelivery.objects.get().pk) == DeliveryStatus.DELIVERED
    assert webhook.received[0][0]["X-A2A-Notification-Token"] == SECRET
    assert SECRET not in caplog.text
