"""a2a.local_dispatch: in the embedded platform process, new tasks start on its own
threads instead of through a Celery message; elsewhere the Celery message stays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from a2a import batch, creation, hints, local_dispatch
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
    one = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(5)]
    many = [o.task for o in batch.create_tasks(requests, user=user)]
    done = [wait_for(t) for t in [one, *many]]
    assert [t.state for t in done] == [TaskState.COMPLETED] * 6
    assert peer.sends == 6
    assert messages == []


def test_without_the_embedded_worker_creation_sends_the_celery_message(
    user: Any, messages: list[Any]
) -> None:
    local_dispatch.start()
    local_dispatch.stop()  # stopped: declines again
    assert local_dispatch.submit(["x"]) is False
    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(2)]
    batch.create_tasks(requests, user=user)
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
    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
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


# --- claimed at birth --------------------------------------------------------------------


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The claims workers take (a due task's, a handed-over task's), recorded."""
    from a2a.models import Task

    taken: list[str] = []
    claim, take_over = Task.claim.__func__, Task.take_over.__func__  # type: ignore[attr-defined]

    def claiming(cls: Any, pk: Any) -> Any:
        taken.append("claim")
        return claim(cls, pk)

    def taking_over(cls: Any, pk: Any, lease: str) -> Any:
        taken.append("take_over")
        return take_over(cls, pk, lease)

    monkeypatch.setattr(Task, "claim", classmethod(claiming))
    monkeypatch.setattr(Task, "take_over", classmethod(taking_over))
    return taken


def test_new_tasks_are_claimed_at_birth_and_started_as_they_are(
    local: None, user: Any, peer: TestAgent, claims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row goes in with its lease, and the thread starts the task without claiming and
    reading it again, on a copy of its own: the creating request goes on with the original
    (it answers with it)."""
    from a2a import worker

    ran: list[Any] = []
    process_just_claimed = worker.process_just_claimed
    monkeypatch.setattr(
        worker, "process_just_claimed", lambda t: ran.append(t) or process_just_claimed(t)
    )
    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    assert task.lease_until is not None  # inserted claimed
    callers = (task, task.agent, task.metadata, task.input, task.outbound_message)
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(3)]
    many = [o.task for o in batch.create_tasks(requests, user=user)]
    done = [wait_for(t) for t in [task, *many]]
    assert [(t.state, t.attempts) for t in done] == [(TaskState.COMPLETED, 1)] * 4
    assert (peer.sends, claims, len(ran)) == (4, [], 4)
    assert done[0].lease_until is None  # released by its transition
    mine = ran[0]
    assert mine.pk == task.pk
    assert not any(
        a is b
        for a, b in zip(
            callers,
            (mine, mine.agent, mine.metadata, mine.input, mine.outbound_message),
            strict=True,
        )
    )


def test_a_task_born_claimed_that_waited_for_a_thread_renews_its_claim_first(
    local: None, user: Any, peer: TestAgent, claims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a import worker

    monkeypatch.setattr(worker, "FRESH_CLAIM_SLACK", -60.0)  # as if it had waited too long
    task = wait_for(creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user))
    assert (task.state, task.attempts, peer.sends, claims) == (
        TaskState.COMPLETED,
        1,
        1,
        ["take_over"],
    )


def test_a_task_born_claimed_whose_claim_changed_meanwhile_is_left_alone(
    user: Any, messages: list[Any], peer: TestAgent
) -> None:
    """Its claim ran out while it waited and the row's lease is no longer its own (another
    worker's, here none at all): it is not sent from the stale copy."""
    from datetime import timedelta

    from a2a import worker

    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    assert task.lease_until is None  # no pool here: not claimed at birth
    task.lease_until = task.created_at - timedelta(seconds=1)
    worker.process_just_claimed(task)
    task.refresh_from_db()
    assert (task.state, task.attempts, task.lease_until, peer.sends) == (
        TaskState.SUBMITTED,
        0,
        None,
        0,
    )


def test_tasks_born_claimed_for_a_pool_that_stopped_are_released_for_the_sweep(
    user: Any, messages: list[Any], peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool stopped between the claim at birth and the commit: the claims are given up
    at once, not left to run out, and the tasks are due for the sweep."""
    monkeypatch.setattr(local_dispatch, "starts_soon", lambda count: True)
    leases: list[Any] = []
    give_up = local_dispatch.give_up
    monkeypatch.setattr(
        local_dispatch,
        "give_up",
        lambda ts: leases.extend(t.lease_until for t in ts) or give_up(ts),
    )
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(2)]
    tasks = [o.task for o in batch.create_tasks(requests, user=user)]
    assert len(leases) == 2  # claimed at birth, then given up
    assert None not in leases
    for task in tasks:
        task.refresh_from_db()
    assert [(t.lease_until, t.next_action) for t in tasks] == [(None, "send")] * 2
    assert (messages, peer.sends) == ([], 0)


def test_a_born_tasks_copy_owns_its_values_whatever_they_are(make_skill: Any) -> None:
    """JSON values are copied in C (marshal); anything else (a Decimal) still is copied."""
    from decimal import Decimal

    from a2a.models import Task
    from agent_profiles.models import AgentProfile

    agent, skill = AgentProfile(id="a", a2a_endpoint="http://agent.example"), make_skill()
    for metadata in ({"match": {"agentId": "a"}, "n": [1, 2.5]}, {"price": Decimal("1.5")}):
        task = Task(skill=skill, agent=agent, input={"q": [1]}, metadata=metadata)
        mine = hints._own_copy(task)
        assert (mine.pk, mine.metadata, mine.input, mine.agent.id) == (
            task.pk,
            metadata,
            {"q": [1]},
            "a",
        )
        assert mine.metadata is not task.metadata
        assert mine.input["q"] is not task.input["q"]
        assert mine.agent is not agent
        assert task.agent is agent


def test_tasks_born_claimed_that_cannot_be_handed_over_are_released_not_failed(
    local: None, user: Any, peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the hand-over must not fail the request that created the task (its
    caller would create it again): the claim is given up for the sweep."""

    def broken(task: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(hints, "_own_copy", broken)
    task = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    task.refresh_from_db()
    assert (task.state, task.next_action, task.lease_until, peer.sends) == (
        TaskState.SUBMITTED,
        "send",
        None,
        0,
    )


def test_new_tasks_behind_a_long_queue_go_in_unclaimed(
    user: Any, messages: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claimed at birth only while the threads would start them within two rounds of jobs:
    behind a longer queue a claim would keep the sweep from them until it ran out."""
    import threading

    from platform_site.elastic_pool import ElasticPool

    submitted: list[Any] = []

    class Busy(ElasticPool):
        def __init__(self) -> None:
            self._lock = threading.Lock()
            self._pending, self._threads = 3, {object(), object()}  # 2 threads, 3 jobs

        def submit(self, item: Any) -> None:
            submitted.append(item)

    monkeypatch.setattr(local_dispatch, "_pool", Busy())
    one = creation.create_task(skill_id="ce-review", input={"product": "a"}, user=user)
    assert one.lease_until is not None  # 3 + 1 <= 2 x 2
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(2)]
    two = [o.task for o in batch.create_tasks(requests, user=user)]
    assert [t.lease_until for t in two] == [None, None]  # 3 + 2 > 2 x 2: hinted as ids
    assert submitted[0] is not one  # its copy
    assert submitted[0].pk == one.pk
    assert submitted[1:] == [str(t.pk) for t in two]
