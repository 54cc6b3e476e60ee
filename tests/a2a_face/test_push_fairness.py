"""Push threads are shared fairly, and a webhook never sees an earlier event after a later
one: a hung host's backlog kept another host's due delivery from the threads it left
free; an earlier event written while a later one's POST was under way was POSTed after
it; a delivery started while it was being put off was put off again."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a.face import push, push_pool
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery, PushNotificationConfig
from agent_profiles.urlguard import use_resolver
from tests.a2a_face.webhook import Webhook, until, working_then_canceled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_webhooks")]


def test_a_healthy_hosts_delivery_is_not_starved_by_a_hung_hosts_backlog(
    task: Task, webhook: Webhook, hung_port: int, settings: Any, monkeypatch: Any
) -> None:
    """A hung webhook host with >= 200 due deliveries (a client's many tasks): the sweep
    took the same first 200 rows (no order, busy ones never put back) and _take_up the
    100 oldest, all of the full host: a healthy host's due delivery (its message lost, or
    'busy' when it came) was never handed although a thread and its host were free."""
    settings.A2A_PUSH_TIMEOUT = 60
    settings.A2A_PUSH_THREADS, settings.A2A_PUSH_PER_HOST = 2, 1
    monkeypatch.setattr(push.deliver_push, "delay", lambda pk: push.deliver_push(pk))
    monkeypatch.setattr(push.deliver_push, "apply_async", lambda *a, **k: None)
    old = timezone.now() - timedelta(seconds=60)
    payload = {"task": {"id": str(task.id), "status": {"state": "TASK_STATE_WORKING"}}}
    hung_url = f"http://hung.example:{hung_port}/hook"
    hung = []
    for i in range(202):
        config = PushNotificationConfig.objects.create(task=task, config_id=f"h{i}", url=hung_url)
        hung.append(
            PushDelivery.objects.create(
                config=config,
                seq=1,
                task_state="TASK_STATE_WORKING",
                payload=payload,
                next_attempt_at=old,
            ).pk
        )
    with use_resolver(lambda host, port: ["127.0.0.1"]):
        assert push_pool.hand(hung[0])  # the hung host's one slot, held
        assert until(lambda: PushDelivery.objects.filter(pk=hung[0], attempts=1).exists())
        good_config = PushNotificationConfig.objects.create(
            task=task, config_id="good", url=webhook.url
        )
        good = PushDelivery.objects.create(
            config=good_config,
            seq=1,
            task_state="TASK_STATE_WORKING",
            payload=payload,
            next_attempt_at=timezone.now(),
        )
        # Its first message was lost (or found no room); the sweep runs, twice, and a
        # POST ending elsewhere takes up what is due.
        push.sweep_push()
        push.sweep_push()
        push_pool._take_up()
        delivered = until(
            lambda: PushDelivery.objects.get(pk=good.pk).status == DeliveryStatus.DELIVERED, 5
        )
        # The healthy POST's thread gives its room back just after it records the delivery.
        assert until(lambda: push_pool.running() == 1, 5)  # the hung host holds one thread
        assert delivered, "the healthy host's delivery was never handed"


def test_an_earlier_event_written_while_a_later_ones_post_is_under_way_is_not_sent(
    task: Task, webhook: Webhook, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """As test_push_pool's superseded test, but the late-written earlier event comes
    while the later one's POST is under way (not yet recorded delivered): it was POSTed
    too, and the webhook saw WORKING after CANCELED. It is superseded now."""
    webhook.hold = {"TASK_STATE_CANCELED": 1.5}  # its POST under way a while
    monkeypatch.setattr(push.deliver_push, "delay", lambda pk: None)
    config, working, canceled = working_then_canceled(
        task, webhook, django_capture_on_commit_callbacks
    )
    payload, seq = working.payload, working.seq
    working.delete()  # not written yet: its handler runs late
    results: list[str] = []
    t = threading.Thread(target=lambda: results.append(push.attempt(canceled.pk)))
    t.start()
    assert until(lambda: webhook.states() == ["TASK_STATE_CANCELED"])
    late = PushDelivery.objects.create(
        config=config,
        seq=seq,
        task_state="TASK_STATE_WORKING",
        payload=payload,
        next_attempt_at=timezone.now(),  # as queue_deliveries writes it
    )
    outcome = push.attempt(late.pk)
    t.join(10)
    assert webhook.states() == ["TASK_STATE_CANCELED"], (outcome, webhook.states())


def test_a_waiting_delivery_started_while_it_is_put_off_is_not_put_off_again(
    task: Task, webhook: Webhook, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The later event's attempt sees the earlier one pending; that one ends at that
    moment and starts it (due now, queued); then the later attempt's push-forward wrote
    'due in A2A_PUSH_SWEEP_INTERVAL' over it, and the queued attempt found it not due:
    it waited for the sweep (30-60 s) although nothing was before it."""
    started: list[int] = []
    monkeypatch.setattr(push.deliver_push, "delay", started.append)
    config, working, canceled = working_then_canceled(
        task, webhook, django_capture_on_commit_callbacks
    )
    started.clear()
    real = push._earlier_pending

    def earlier_then_it_ends(event: dict[str, Any]) -> bool:
        pending = real(event)
        if pending and event["seq"] == canceled.seq:
            # The earlier POST ends right now (another push thread): delivered, next started.
            PushDelivery.objects.filter(pk=working.pk).update(status=DeliveryStatus.DELIVERED)
            push._start_next({"config_id": config.pk, "seq": working.seq})
        return pending

    monkeypatch.setattr(push, "_earlier_pending", earlier_then_it_ends)
    assert push.attempt(canceled.pk) == "waiting"
    assert started == [canceled.pk]  # the earlier one's end started it
    assert push.attempt(canceled.pk) == DeliveryStatus.DELIVERED
