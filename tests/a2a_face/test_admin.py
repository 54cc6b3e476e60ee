"""The push notification admin: operators see webhooks and deliveries, never secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from a2a.face import push_configs
from a2a.models import Task
from a2a.push_models import PushNotificationConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(make_user: Callable[..., Any]) -> Client:
    user = make_user("ops", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


def test_configs_are_listed_without_their_secrets(
    staff: Client, settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    task = make_task(alice)
    config = push_configs.create_config(
        task,
        {
            "url": "http://127.0.0.1:9/hook",
            "token": "secret-token",
            "authentication": {"scheme": "Bearer", "credentials": "secret-creds"},
        },
    )
    listing = staff.get("/admin/a2a/pushnotificationconfig/")
    assert listing.status_code == 200
    assert b"127.0.0.1:9/hook" in listing.content
    page = staff.get(f"/admin/a2a/pushnotificationconfig/{config.pk}/change/")
    assert page.status_code == 200
    assert b"secret-token" not in page.content
    assert b"secret-creds" not in page.content


def test_a_disabled_config_can_be_enabled_again(
    staff: Client, settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    config = push_configs.create_config(make_task(alice), {"url": "http://127.0.0.1:9/hook"})
    PushNotificationConfig.objects.filter(pk=config.pk).update(
        enabled=False, consecutive_failures=10, disabled_reason="x"
    )
    staff.post(
        "/admin/a2a/pushnotificationconfig/",
        {"action": "enable_again", "_selected_action": [config.pk]},
    )
    config.refresh_from_db()
    assert (config.enabled, config.consecutive_failures) == (True, 0)


def test_the_list_reads_no_task_whole(
    staff: Client, settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    """The list showed each config's task (its ``str``), reading the whole task, artifacts
    and all (megabytes each), for every row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.ALLOW_LOOPBACK_URLS = True
    task = make_task(alice)
    Task.objects.filter(pk=task.pk).update(artifacts=[{"parts": [{"text": "x" * 100_000}]}])
    push_configs.create_config(task, {"url": "http://127.0.0.1:9/hook"})
    with CaptureQueriesContext(connection) as queries:
        listing = staff.get("/admin/a2a/pushnotificationconfig/")
    assert listing.status_code == 200
    assert str(task.pk) in listing.content.decode()
    read = [q["sql"] for q in queries.captured_queries if '"a2a_task"."artifacts"' in q["sql"]]
    assert read == []
