"""``Task.watched``: the receivers that look for push configs and gateway deliveries after
a transition skip their statements for tasks nothing else follows, and never miss one that
something does (a config made meanwhile, a hand-over to the gateway)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from a2a import creation
from a2a.models import Task
from a2a.push_models import PushDelivery, PushNotificationConfig
from a2a.signals import task_changed
from a2a.states import TaskState, Transport
from gateway import services as gateway_services
from gateway.models import Delivery, DeliveryStatus

pytestmark = pytest.mark.django_db

CONFIG = {"url": "https://hooks.example.com/a2a", "token": "tok-1"}


class Heard:
    """What ``task_changed`` said, while connected."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, sender: Any, **kwargs: Any) -> None:
        self.calls.append(kwargs)

    def __enter__(self) -> Heard:
        task_changed.connect(self, dispatch_uid="tests.heard")
        return self

    def __exit__(self, *exc: Any) -> None:
        task_changed.disconnect(dispatch_uid="tests.heard")


def after_commit_sql(task: Task, verb: Any, capture: Any) -> list[str]:
    """The statements the receivers of ``verb``'s transition run after its commit."""
    with capture() as callbacks:
        assert verb()
    with CaptureQueriesContext(connection) as queries:
        for callback in callbacks:
            callback()
    return [q["sql"] for q in queries.captured_queries]


def test_a_task_nothing_follows_ends_with_no_lookups_after_commit(
    task: Task, django_capture_on_commit_callbacks: Any
) -> None:
    assert Task.objects.get(pk=task.pk).watched is False
    with Heard() as heard:
        started = after_commit_sql(task, task.start_work, django_capture_on_commit_callbacks)
        ended = after_commit_sql(
            task, lambda: task.complete({"ok": 1}, []), django_capture_on_commit_callbacks
        )
    assert [call["watched"] for call in heard.calls] == [False, False]
    push_table = PushNotificationConfig._meta.db_table
    delivery_table = Delivery._meta.db_table
    for sql in started + ended:
        assert push_table not in sql, sql
        assert delivery_table not in sql, sql


def test_a_config_makes_the_task_watched_and_its_changes_are_pushed(
    task: Task, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from a2a.face import push, push_configs

    monkeypatch.setattr(push.deliver_push, "delay", lambda pk: None)
    push_configs.create_config(task, CONFIG)  # the task object in hand still says unwatched
    assert task.watched is False
    assert Task.objects.get(pk=task.pk).watched is True
    with Heard() as heard, django_capture_on_commit_callbacks(execute=True):
        task.start_work()
    assert heard.calls[0]["watched"] is True
    assert task.watched is True
    assert PushDelivery.objects.filter(task_state=TaskState.WORKING).count() == 1


def test_a_task_handed_to_the_gateway_is_watched_and_its_end_withdraws_the_delivery(
    task: Task, django_capture_on_commit_callbacks: Any
) -> None:
    assert gateway_services.push_task(task, reason="endpoint down") == Transport.OFFLINE
    task.refresh_from_db()
    assert task.watched is True
    with django_capture_on_commit_callbacks(execute=True):
        task.fail("offline_timeout", "nobody connected")
    assert Delivery.objects.get(task=task).status == DeliveryStatus.CANCELED
    # A fresh attempt over HTTP (a person's retry) keeps the mark: the old delivery's row
    # is still the gateway's to withdraw.
    assert task.resubmit("retry")
    assert Task.objects.get(pk=task.pk).watched is True


def test_a_socket_only_agents_task_is_watched_from_its_creation(
    user: Any, make_agent: Any, skill: Any
) -> None:
    make_agent(id="socket-only", skills=[skill], a2a_endpoint="")
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
    assert Task.objects.get(pk=task.pk).watched is True


def test_when_the_row_cannot_say_the_receivers_look(
    task: Task, make_agent: Any, skill: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A reassign writes the agent through the ORM, whose UPDATE returns nothing."""
    other = make_agent(id="other-agent", skills=[skill])
    with Heard() as heard:
        sql = after_commit_sql(
            task, lambda: task.reassign(other, "moved"), django_capture_on_commit_callbacks
        )
    assert heard.calls[0]["watched"] is None
    assert any(PushNotificationConfig._meta.db_table in statement for statement in sql)


@pytest.mark.django_db(transaction=True)
def test_a_transition_racing_a_new_config_waits_for_it_and_says_watched(task: Task) -> None:
    """A config being created holds the row: the transition waits, then sees the mark
    (a lookup that ran before the config's commit would have missed it)."""
    held, release = threading.Event(), threading.Event()

    def create_config() -> None:
        try:
            with transaction.atomic():
                Task.watch(task.pk)
                held.set()
                release.wait(10)
        finally:
            connection.close()

    creator = threading.Thread(target=create_config)
    creator.start()
    heard = Heard()
    moved: list[bool] = []

    def transition() -> None:
        try:
            moved.append(task.start_work())
        finally:
            connection.close()

    mover = threading.Thread(target=transition)
    try:
        assert held.wait(5)
        with heard:
            mover.start()
            mover.join(0.5)
            assert mover.is_alive()  # waiting for the config's transaction
            release.set()
            mover.join(10)
    finally:
        release.set()
        creator.join()
        mover.join()
    assert moved == [True]
    assert [call["watched"] for call in heard.calls] == [True]
