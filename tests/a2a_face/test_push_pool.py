"""Webhook POSTs run on push threads of their own, bounded per process and per host
(a2a/face/push_pool.py): a client whose webhooks never answer stalled the Celery
worker's threads, which also poll agents and start tasks, and every other client's
pushes with them. And a late-written earlier event never reaches a webhook after a
later one was delivered."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a.face import push, push_configs, push_pool
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery
from agent_profiles.urlguard import use_resolver
from tests.a2a_face.webhook import Webhook, push_config, until, working_then_canceled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_webhooks")]

HUNG_HOST = "hung.example"


def _delivery(task: Task, url: str, captured: Any) -> int:
    push_configs.create_config(task, push_config(url))
    with captured(execute=True):
        task.start_work()
    return PushDelivery.objects.get(config__task=task).pk


def test_hung_webhooks_hold_their_hosts_threads_and_no_others(
    make_task: Callable[..., Task],
    alice: Any,
    webhook: Webhook,
    hung_port: int,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.A2A_PUSH_TIMEOUT = 60  # the hung POSTs stay in flight for the whole test
    settings.A2A_PUSH_THREADS, settings.A2A_PUSH_PER_HOST = 4, 2
    queued: list[int] = []
    monkeypatch.setattr(push.deliver_push, "delay", queued.append)
    with use_resolver(lambda host, port: ["127.0.0.1"]):
        hung = [
            _delivery(
                make_task(alice),
                f"http://{HUNG_HOST}:{hung_port}/hook",
                django_capture_on_commit_callbacks,
            )
            for _ in range(5)
        ]
        good = _delivery(make_task(alice), webhook.url, django_capture_on_commit_callbacks)
        # What the worker's Celery threads do with them: hand each over, never POST.
        answers = [push.deliver_push(pk) for pk in hung]
        assert answers == ["handed", "handed", "busy", "busy", "busy"]
        assert until(lambda: push_pool.running() == 2)
        assert push.deliver_push(good) == "handed"  # another host: a thread is free
        delivered = PushDelivery.objects.filter(pk=good, status=DeliveryStatus.DELIVERED)
        assert until(delivered.exists)
        assert len(webhook.received) == 1
        # Meanwhile the hung host's two POSTs are still under way, the others wait. The
        # good POST's thread releases its place just after writing DELIVERED: wait for it.
        assert until(lambda: push_pool.running() == 2)
        waiting = PushDelivery.objects.filter(pk__in=hung[2:], attempts=0)
        assert waiting.count() == 3


def test_an_earlier_event_written_after_a_later_one_was_delivered_is_not_sent(
    task: Task,
    webhook: Webhook,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Two transitions close together: the later one's delivery was written and
    delivered before the earlier one's was (each is written after its commit). The
    earlier one is superseded, and the webhook never sees WORKING after CANCELED."""
    started: list[int] = []
    monkeypatch.setattr(push.deliver_push, "delay", started.append)
    config, working, canceled = working_then_canceled(
        task, webhook, django_capture_on_commit_callbacks
    )
    payload, seq = working.payload, working.seq
    working.delete()  # not written yet, as the late handler had not written it
    assert push.attempt(canceled.pk) == DeliveryStatus.DELIVERED
    late = PushDelivery.objects.create(
        config=config, seq=seq, task_state="TASK_STATE_WORKING", payload=payload
    )
    assert push.attempt(late.pk) == DeliveryStatus.SUPERSEDED
    states = [body["task"]["status"]["state"] for _, body in webhook.received]
    assert states == ["TASK_STATE_CANCELED"]
    late.refresh_from_db()
    assert (late.status, late.attempts) == (DeliveryStatus.SUPERSEDED, 0)


def test_deliveries_with_no_room_go_when_a_thread_frees(
    make_task: Callable[..., Task],
    alice: Any,
    webhook: Webhook,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """One push thread: the two deliveries that found none wait, due, and the first POST
    that ends takes them up (no sweep runs here: before, they waited for it, 30 s)."""
    settings.A2A_PUSH_THREADS = 1
    monkeypatch.setattr(push.deliver_push, "delay", lambda pk: None)
    pks = [
        _delivery(make_task(alice), webhook.url, django_capture_on_commit_callbacks)
        for _ in range(3)
    ]
    assert [push.deliver_push(pk) for pk in pks] == ["handed", "busy", "busy"]
    delivered = PushDelivery.objects.filter(pk__in=pks, status=DeliveryStatus.DELIVERED)
    assert until(lambda: delivered.count() == 3)
    assert len(webhook.received) == 3


def test_a_delivery_waiting_for_an_earlier_event_is_not_taken_up_again_and_again(
    task: Task,
    webhook: Webhook,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The earlier event's POST is under way: the later one waits, not due until that
    one ends and starts it. Before, the push thread found it due again at once and took
    it up hundreds of times a second for as long as the earlier POST took."""
    started: list[int] = []
    monkeypatch.setattr(push.deliver_push, "delay", started.append)
    _, working, canceled = working_then_canceled(task, webhook, django_capture_on_commit_callbacks)
    started.clear()
    lease = timezone.now() + timedelta(seconds=60)  # as _claim leaves a POST under way
    PushDelivery.objects.filter(pk=working.pk).update(next_attempt_at=lease, attempts=1)
    calls: list[int] = []
    real = push.attempt
    monkeypatch.setattr(push, "attempt", lambda pk: calls.append(pk) or real(pk))
    assert push_pool.hand(canceled.pk)
    assert until(lambda: push_pool.running() == 0)
    assert calls == [canceled.pk]
    canceled.refresh_from_db()
    assert canceled.next_attempt_at > timezone.now() + timedelta(seconds=10)
    # The earlier one ends: it starts the later one, due now.
    PushDelivery.objects.filter(pk=working.pk).update(next_attempt_at=timezone.now())
    monkeypatch.setattr(push, "attempt", real)
    assert push.attempt(working.pk) == DeliveryStatus.DELIVERED
    assert started == [canceled.pk]
    assert push.attempt(canceled.pk) == DeliveryStatus.DELIVERED
