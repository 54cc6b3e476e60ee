"""a2a.local_dispatch: in the embedded platform process, new tasks start on its own
threads instead of through a Celery message; elsewhere the Celery message stays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from a2a import local_dispatch, services
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)  # pool threads see committed rows


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[tuple[str, Any]]:
    """The Celery messages creation sends (recorded, not sent); not through the
    distributed mode's Redis list (a2a.hint_queue, tested on its own)."""
    from a2a import tasks

    settings.A2A_HINT_QUEUE = False
    sent: list[tuple[str, Any]] = []
    monkeypatch.setattr(tasks.process, "delay", lambda *a: sent.append(("process", a)))
    monkeypatch.setattr(tasks.process_many, "delay", lambda *a: sent.append(("many", a)))
    return sent


@pytest.fixture
def local() -> Iterator[None]:
    local_dispatch.start()
    local_dispatch.start()  # as the embedded worker might: a second start changes nothing
    try:
        yield
    finally:
        local_dispatch.stop()


@pytest.fixture
def user(make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent, settings: Any) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True  # the test agent is on loopback (off when distributed)
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    return make_user()


def test_new_tasks_start_on_local_threads_without_a_celery_message(
    local: None, user: Any, messages: list[Any], peer: TestAgent
) -> None:
    one = services.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    requests = [services.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(5)]
    batch = [o.task for o in services.create_tasks(requests, user=user)]
    done = [wait_for(t) for t in [one, *batch]]
    assert [t.state for t in done] == [TaskState.COMPLETED] * 6
    assert peer.sends == 6
    assert messages == []


def test_without_the_embedded_worker_creation_sends_the_celery_message(
    user: Any, messages: list[Any]
) -> None:
    local_dispatch.start()
    local_dispatch.stop()  # stopped: declines again
    assert local_dispatch.submit(["x"]) is False
    task = services.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    requests = [services.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(2)]
    services.create_tasks(requests, user=user)
    assert messages[0] == ("process", (str(task.pk),))
    assert messages[1][0] == "many"
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED  # left for a worker (or the sweep)


def test_the_embedded_worker_starts_and_stops_local_dispatch() -> None:
    """a2a registers it at app start; platform_site.embedded runs it with the worker."""
    from platform_site import embedded

    assert (local_dispatch.start, local_dispatch.stop) in embedded._services


def test_a_stopping_pool_leaves_queued_tasks_due_for_the_sweep(
    user: Any, messages: list[Any], peer: TestAgent
) -> None:
    """What waited for a thread when the platform stopped is not sent; nothing is lost
    either: the row stays SUBMITTED and due."""
    task = services.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    local_dispatch._run(str(task.pk))  # submitted before stop(), its thread ran after
    assert local_dispatch.pending() == 0
    task.refresh_from_db()
    assert (task.state, task.next_action, peer.sends) == (TaskState.SUBMITTED, "send", 0)


def test_a_pool_shut_down_under_a_submit_declines_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shut down between the check and the submit: no error reaches the caller's commit
    hook, and no Celery message is needed (the sweep acts on the due rows)."""
    from platform_site.elastic_pool import ElasticPool

    closed = ElasticPool(1, "test", print)
    closed.stop()
    monkeypatch.setattr(local_dispatch, "_pool", closed)
    assert local_dispatch.submit(["a", "b"]) is True
