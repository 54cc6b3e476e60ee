"""Long calls marked alive in Redis for the other worker processes (:mod:`a2a.lease_marks`):
a sweep that claimed a task whose claim lapsed while the database was away, and whose long
call runs in another process, does nothing with it and leaves its claim to that process,
whose keeper takes it back and renews from it. Before, it acted: a held message was sent
again and the agent ran it twice. Both sides in this one process, told apart by the mark's
owner; real Redis and PostgreSQL (the distributed mode)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from a2a import lease_keeper, lease_marks, services, worker
from a2a.models import Task
from a2a.states import NextAction
from tests.a2a.helpers import working
from tests.a2a.test_lease_keeper import database_away

pytestmark = [pytest.mark.distributed, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client(task: Task) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = [lease_marks._mark_key(task.pk), lease_marks._handback_key(task.pk)]
    client.delete(*keys)
    yield client
    client.delete(*keys)


def elsewhere(client: redis.Redis, call: Task) -> None:
    """The call on ``call`` runs in another process, as its keeper marks it."""
    value = f"another-host:1|{lease_marks._what(call)}"
    client.set(lease_marks._mark_key(call.pk), value, ex=30)


def claimed(task: Task) -> Task:
    working(task)
    task.schedule(NextAction.FOLLOW)
    held = worker.claim(task.pk)
    assert held is not None
    return held


def lapsed_and_claimed_again(task: Task) -> Task:
    """The claim lapsed, and a sweep claimed the task: the sweep's object."""
    Task.objects.filter(pk=task.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    again = worker.claim(task.pk)
    assert again is not None
    return again


def test_a_sweep_leaves_a_task_whose_long_call_runs_elsewhere(
    task: Task, client: redis.Redis
) -> None:
    held = claimed(task)
    elsewhere(client, held)
    again = lapsed_and_claimed_again(held)
    assert lease_marks.held_elsewhere(again)
    handed = client.get(lease_marks._handback_key(task.pk))
    assert handed is not None
    assert handed.decode() == again.lease_until.isoformat()
    before = Task.objects.get(pk=task.pk)
    worker._run_in_thread(task.pk)  # what the sweep does with it: nothing
    after = Task.objects.get(pk=task.pk)
    assert (after.next_action, after.attempts, after.error) == (
        before.next_action,
        before.attempts,
        before.error,
    )
    assert after.lease_until == again.lease_until  # left for the call to take back


@pytest.mark.parametrize("owner", ["this process", "no mark", "canceled since"])
def test_a_task_not_marked_by_another_process_is_acted_on(
    task: Task, client: redis.Redis, owner: str
) -> None:
    """Its own mark (adopt decides), none (the process died), or a mark of another
    process's call on a task a person canceled since: the cancel is acted on."""
    held = claimed(task)
    if owner == "this process":
        value = f"{lease_marks._owner()}|{lease_marks._what(held)}"
        client.set(lease_marks._mark_key(task.pk), value, ex=30)
    elif owner == "canceled since":
        elsewhere(client, held)
        services.cancel_task(Task.objects.get(pk=task.pk), by="ops")
    again = lapsed_and_claimed_again(held)
    assert not lease_marks.held_elsewhere(again)
    assert client.get(lease_marks._handback_key(task.pk)) is None


def test_the_keeper_takes_back_a_claim_another_process_left_it(
    task: Task, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = claimed(task)  # the long call's object
    lease_keeper.keep(held)
    try:
        mark = client.get(lease_marks._mark_key(task.pk)).decode()
        assert mark == f"{lease_marks._owner()}|{lease_marks._what(held)}"
        # The database was away: renewals failed, the claim lapsed, another process's
        # sweep claimed the task and left its claim (its mark said the call runs here).
        database_away(monkeypatch)
        theirs = timezone.now() + timedelta(seconds=20)
        Task.objects.filter(pk=task.pk).update(lease_until=theirs)
        client.set(lease_marks._handback_key(task.pk), theirs.isoformat(), ex=30)
        lease_keeper.renew_due(every=True)  # its renewal fails; the hand-back is taken
        assert held.lease_until == theirs
        assert client.get(lease_marks._handback_key(task.pk)) is None
        lease_keeper.renew_due(every=True)  # and renewed from it
        assert Task.objects.get(pk=task.pk).lease_until > theirs
        assert lease_keeper.kept_ids() == [task.pk]
    finally:
        lease_keeper.let_go(held)
    assert client.get(lease_marks._mark_key(task.pk)) is None  # the call ended


def test_without_redis_nothing_is_held_elsewhere(
    task: Task, client: redis.Redis, settings: Any
) -> None:
    held = claimed(task)
    elsewhere(client, held)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nobody there
    lease_marks.redis_clients._clients.clear()
    try:
        assert not lease_marks.held_elsewhere(lapsed_and_claimed_again(held))
    finally:
        lease_marks.redis_clients._clients.clear()
