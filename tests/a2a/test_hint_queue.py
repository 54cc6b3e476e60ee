"""a2a.hint_queue: in the distributed mode, immediate hints go to the workers through one
Redis list while a worker listens, and as Celery messages while none does."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings

from a2a import batch, creation, hint_queue, local_dispatch
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a.helpers import lose_new_tasks_hints, wait_for
from tests.support.agents import TestAgent
from tests.support.serving import free_port

pytestmark = [pytest.mark.distributed, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """Redis with this deployment's hint list and listeners empty before and after."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = [hint_queue.key(), f"{hint_queue.key()}:listeners"]
    client.delete(*keys)
    hint_queue.forget_listeners()
    yield client
    client.delete(*keys)
    hint_queue.forget_listeners()


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The Celery messages creation sends (recorded, not sent)."""
    from a2a import tasks

    sent: list[tuple[str, Any]] = []
    monkeypatch.setattr(tasks.process, "delay", lambda *a: sent.append(("process", a)))
    monkeypatch.setattr(tasks.process_many, "delay", lambda *a: sent.append(("many", a)))
    return sent


@pytest.fixture
def user(make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent, settings: Any) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True  # the test agent is on loopback (off when distributed)
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    return make_user()


@pytest.fixture
def listener(client: redis.Redis) -> Iterator[hint_queue.Listener]:
    listener = hint_queue.Listener(threads=2)
    listener.start()
    try:
        yield listener
    finally:
        listener.stop()


def test_a_listening_worker_starts_new_tasks_without_a_celery_message(
    listener: hint_queue.Listener,
    user: Any,
    messages: list[Any],
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Created as in an API process, which starts no tasks itself (this one runs the
    # listener's threads, and would claim them at birth).
    monkeypatch.setattr(local_dispatch, "starts_soon", lambda count: False)
    wait_for_listener()
    one = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(5)]
    many = [o.task for o in batch.create_tasks(requests, user=user)]
    done = [wait_for(t, timeout=20) for t in [one, *many]]
    assert [t.state for t in done] == [TaskState.COMPLETED] * 6
    assert (peer.sends, messages) == (6, [])


def wait_for_listener() -> None:
    deadline = time.monotonic() + 10
    while not hint_queue._listener_alive(hint_queue._redis()):
        assert time.monotonic() < deadline, "the listener never said it was alive"
        hint_queue.forget_listeners()
        time.sleep(0.05)


def test_a_batch_of_hints_is_claimed_at_once_and_started_as_claimed(
    client: redis.Redis,
    user: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One claim for the hints popped together (one statement on PostgreSQL), none on the
    threads; a hint whose task is held elsewhere claims nothing, and an entry that is not
    a task id is dropped without costing the others."""
    lose_new_tasks_hints(monkeypatch)
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(4)]
    tasks = [o.task for o in batch.create_tasks(requests, user=user)]
    held = Task.claim(tasks[3].pk)  # another worker's
    assert held is not None
    batches: list[int] = []
    claim_many = Task.claim_many.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        Task,
        "claim_many",
        classmethod(lambda cls, ids: batches.append(len(ids)) or claim_many(cls, ids)),
    )
    monkeypatch.setattr(Task, "claim", classmethod(lambda cls, pk: pytest.fail("claimed alone")))
    client.rpush(hint_queue.key(), *[str(t.pk) for t in tasks], "not-a-task")
    local_dispatch.start(3)
    try:
        hint_queue.Listener(threads=3)._once(client)  # room for 6: pops all 5
        done = [wait_for(t, timeout=20) for t in tasks[:3]]
    finally:
        local_dispatch.stop()
    assert batches == [4]
    assert [(t.state, t.attempts) for t in done] == [(TaskState.COMPLETED, 1)] * 3
    assert peer.sends == 3
    assert Task.objects.get(pk=tasks[3].pk).lease_until == held.lease_until  # untouched
    assert "not a task id" in caplog.text


def test_without_a_listener_the_celery_message_is_sent(
    client: redis.Redis, user: Any, messages: list[Any]
) -> None:
    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    assert messages == [("process", (str(task.pk),))]
    assert client.llen(hint_queue.key()) == 0


def test_a_listener_is_seen_as_soon_as_it_started_and_forgotten_once_stopped(
    client: redis.Redis,
) -> None:
    listener = hint_queue.Listener(threads=1)
    listener.start()
    try:
        assert hint_queue.publish([uuid.uuid4()]) is True  # no wait: start() vouched for it
    finally:
        listener.stop()
    assert hint_queue.publish([uuid.uuid4()]) is False  # its entry is gone, not stale


def test_a_busy_listener_leaves_the_hints_to_other_workers(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[list[str]] = []
    claim = classmethod(lambda cls, ids: started.append([str(i) for i in ids]) or [])
    monkeypatch.setattr(Task, "claim_many", claim)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    client.rpush(hint_queue.key(), *ids)
    listener = hint_queue.Listener(threads=1)
    monkeypatch.setattr(local_dispatch, "pending", lambda: 2)  # its two slots are taken
    listener._once(client)
    assert (client.llen(hint_queue.key()), started) == (3, [])
    monkeypatch.setattr(local_dispatch, "pending", lambda: 0)
    listener._once(client)  # room for two: pops two, leaves one for another worker
    assert (client.llen(hint_queue.key()), started) == (1, [ids[:2]])


def test_the_list_keeps_only_the_newest_hints(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every worker stopped nothing drains it: it must not grow without bound (the
    sweep acts on the rows whose hints were dropped)."""
    monkeypatch.setattr(hint_queue, "MAX_WAITING", 3)
    monkeypatch.setattr(hint_queue, "_listener_alive", lambda client: True)
    ids = [str(uuid.uuid4()) for _ in range(5)]
    assert hint_queue.publish(ids) is True
    assert [raw.decode() for raw in client.lrange(hint_queue.key(), 0, -1)] == ids[2:]


def test_when_redis_fails_the_sender_falls_back_to_celery(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    down = redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    monkeypatch.setattr(hint_queue, "_sender", lambda: down)
    hint_queue.forget_listeners()
    monkeypatch.setattr(hint_queue, "_listener_alive", lambda client: True)
    assert hint_queue.publish([uuid.uuid4()]) is False
    assert "could not publish" in caplog.text


def test_a_stalled_redis_holds_a_sender_a_second_then_none_for_a_while(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A stalled Redis (connections open, no answer) held each task's creation for the
    sender's read timeout; now one second, and the senders after it go to Celery at once
    for a while (they would each wait the same second)."""
    from platform_site import redis_clients
    from tests.support.processes import redis_server
    from tests.support.redis_stall import stalled

    with redis_server() as server:
        settings.REDIS_URL = server.url
        monkeypatch.setattr(redis_clients, "_clients", {})
        hint_queue.forget_listeners()
        hint_queue.Listener(threads=1)._mark(redis.Redis.from_url(server.url))
        assert hint_queue.publish([uuid.uuid4()]) is True  # connected, a listener alive
        monkeypatch.setattr(hint_queue, "CHECK_SECONDS", 0.0)  # each publish reads Redis
        with stalled(server):
            started = time.monotonic()
            assert hint_queue.publish([uuid.uuid4()]) is False
            first = time.monotonic() - started
            monkeypatch.setattr(hint_queue, "CHECK_SECONDS", 30.0)
            started = time.monotonic()
            assert hint_queue.publish([uuid.uuid4()]) is False
            second = time.monotonic() - started
    hint_queue.forget_listeners()
    assert first < 3.0, first
    assert second < 0.5, second


def test_a_stalled_broker_gives_a_celery_message_up_in_seconds() -> None:
    """kombu reads without a timeout by default: a publish to a stalled Redis waited as
    long as the stall did, and with it every request creating a task (its hint goes out
    after the commit, as a Celery message when no listener takes it). The settings'
    socket timeout and retry policy bound it; the sweep starts the task."""
    import threading

    from celery import Celery

    from tests.support.processes import redis_server
    from tests.support.redis_stall import stalled

    outcome: list[BaseException | None] = []
    with redis_server() as server:
        app = Celery("stalled-broker")
        app.config_from_object("django.conf:settings", namespace="CELERY")
        app.conf.broker_url = server.url
        app.send_task("a2a.process", args=[str(uuid.uuid4())])  # connected

        def publish() -> None:
            try:
                app.send_task("a2a.process", args=[str(uuid.uuid4())])
                outcome.append(None)
            except Exception as exc:
                outcome.append(exc)

        with stalled(server):
            sender = threading.Thread(target=publish, daemon=True)
            sender.start()
            sender.join(timeout=20)
        sender.join(timeout=10)  # the stall over: an unbounded publish ends now, too late
        app.close()
    assert len(outcome) == 1
    assert outcome[0] is not None, "the publish waited out the stall"
    assert "Timeout" in str(outcome[0]), outcome


def test_switched_off_it_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "A2A_HINT_QUEUE", False)
    assert hint_queue.enabled() is False
    assert hint_queue.publish([uuid.uuid4()]) is False


def test_celery_workers_listen_while_they_run() -> None:
    """a2a connects the listener to Celery's worker signals at app start."""
    from celery.signals import worker_ready, worker_shutdown

    assert hint_queue.start_listening in [r[1] for r in worker_ready.receivers]
    assert hint_queue.stop_listening in [r[1] for r in worker_shutdown.receivers]
