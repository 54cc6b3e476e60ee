"""Lines about a task's webhook pushes name the task (DESIGN.md "Operations": with
``LOG_FORMAT=json`` every line about a task carries ``task_id``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from a2a.face import push, push_configs
from a2a.push_models import PushDelivery
from tests.a2a_face.webhook import push_config
from tests.support.serving import down_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_webhooks")]


def test_a_failed_push_and_its_disabled_config_name_their_task(
    task: Any, settings: Any, caplog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.A2A_PUSH_BACKOFF = 0
    settings.A2A_PUSH_DISABLE_AFTER = 1  # the first failure disables the config: both lines
    settings.A2A_PUSH_TIMEOUT = 2
    push_configs.create_config(task, push_config(down_url() + "/hook"))
    with django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    delivery = PushDelivery.objects.get()
    with caplog.at_level(logging.INFO, logger="a2a.face"):
        push.attempt(delivery.pk)
    lines = [r for r in caplog.records if r.name == "a2a.face.push"]
    messages = [r.getMessage() for r in lines]
    assert any("attempt 1 failed" in m for m in messages), messages
    assert any("disabled after repeated failures" in m for m in messages), messages
    assert [getattr(r, "task_id", None) for r in lines] == [str(task.pk)] * len(lines)
