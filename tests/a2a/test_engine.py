"""The batched poll engine: fair claims, quiet answers re-scheduled together, Retry-After
obeyed for all of an agent's tasks, and the usual per-task rules for everything else."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import creation, engine, engine_claims, services, worker
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_picks_round_robin_between_agents_within_each_agents_share() -> None:
    candidates = [(f"a{i}", "a") for i in range(6)] + [("b0", "b"), ("c0", "c"), ("c1", "c")]
    assert engine_claims.pick_fairly(candidates, limit=5, per_agent=10) == [
        "a0",
        "b0",
        "c0",
        "a1",
        "c1",
    ]
    assert engine_claims.pick_fairly(candidates, limit=10, per_agent=2) == [
        "a0",
        "b0",
        "c0",
        "a1",
        "c1",
    ]
    assert engine_claims.pick_fairly([], limit=5, per_agent=2) == []
    # What the sweep's earlier batches gave each agent counts against its share.
    spent = Counter({"a": 1, "c": 2})
    assert engine_claims.pick_fairly(candidates, limit=10, per_agent=2, spent=spent) == ["a0", "b0"]
    assert spent == {"a": 2, "b": 1, "c": 2}


@pytest.fixture
def peer() -> Any:
    with run_agent() as agent:
        yield agent


def working_tasks(
    n: int, user: Any, peer: TestAgent, make_agent: Any, skill: Any, agent_id: str = "agent-one"
) -> list[Task]:
    """N tasks the agent holds WORKING (sent for real), each due for a poll now."""
    from a2a.worker import process_task

    tasks = []
    for _ in range(n):
        task = creation.create_task(
            skill_id=skill.id,
            input={"product": "lamp", "behaviour": "working"},
            agent_id=agent_id,
            user=user,
        )
        process_task(task.pk)
        tasks.append(task)
    ids = [t.pk for t in tasks]
    # A first round of polls sees them WORKING (news: applied task by task) ...
    Task.objects.filter(pk__in=ids).update(next_poll_at=timezone.now())
    engine.poll_due(100)
    # ... and they are due again.
    Task.objects.filter(pk__in=ids).update(next_poll_at=timezone.now())
    for task in tasks:
        task.refresh_from_db()
        assert task.state == TaskState.WORKING
    peer.reset()
    return tasks


def test_quiet_polls_are_rescheduled_in_few_queries(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    tasks = working_tasks(6, make_user(), peer, make_agent, skill)
    with CaptureQueriesContext(connection) as queries:
        assert engine.poll_due(100) == 6
    writes = [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(writes) <= 2  # the claim, and one re-schedule for the batch
    for task in tasks:
        task.refresh_from_db()
        assert task.state == TaskState.WORKING
        assert task.next_action == NextAction.POLL
        assert task.lease_until is None
        assert task.next_poll_at > timezone.now()
        assert peer.requests_for(task.remote_task_id) == 1
    assert engine.poll_due(100) == 0  # nothing due any more


def test_a_cancel_during_the_batch_wins(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    (task,) = working_tasks(1, make_user(), peer, make_agent, skill)
    tasks, lease = engine_claims.claim_polls(10)
    services.cancel_task(Task.objects.get(pk=task.pk))  # a person, meanwhile
    polled = engine.Polled(tasks[0], engine.agent_registry.target_for(tasks[0].agent))
    engine._call(polled)
    assert engine.reschedule_quiet([polled], lease) == 0
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.next_action != NextAction.POLL


def test_answers_with_news_go_through_the_usual_mapping(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    user = make_user()
    task = creation.create_task(
        skill_id=skill.id, input={"product": "lamp", "behaviour": "slow", "seconds": 0.2}, user=user
    )
    from a2a.worker import process_task

    process_task(task.pk)
    import time

    time.sleep(0.5)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    assert engine.poll_due(10) == 1
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1


def test_retry_after_pauses_every_poll_of_the_agent(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    tasks = working_tasks(3, make_user(), peer, make_agent, skill)
    # The agent answers the first poll with 429 Retry-After: 1 (the "busy" mode).
    from agent_profiles.models import AgentProfile

    profile = AgentProfile.objects.get(pk="agent-one")
    interface = {**(profile.interface or {}), "url": peer.url_for("busy")}
    AgentProfile.objects.filter(pk="agent-one").update(
        a2a_endpoint=peer.url_for("busy"), interface=interface
    )
    later = timezone.now() + timedelta(seconds=0.9)
    engine.poll_due(1)
    for task in tasks:
        task.refresh_from_db()
        assert task.next_poll_at >= later


def test_quiet_safety_net_polls_back_off(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """Tasks its agent's listings follow: a batch's quiet polls space the next one out
    (times A2A_POLL_BACKOFF from the safety interval, capped by its own maximum)."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_POLL_INTERVAL, settings.A2A_POLL_BACKOFF = 60.0, 2.0
    settings.A2A_SAFETY_POLL_INTERVAL_MAX = 200.0
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    (task,) = working_tasks(1, make_user(), peer, make_agent, skill)
    assert task.metadata["followedBy"] == "list"
    seen = []
    for _ in range(3):
        Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
        assert engine.poll_due(100) == 1
        task.refresh_from_db()
        seen.append(task.poll_interval)
        assert task.next_poll_at > timezone.now() + timedelta(seconds=task.poll_interval - 5)
    assert seen == [120.0, 200.0, 200.0]


def polled_by_agent(tasks: list[Task]) -> Counter[str]:
    """How many of ``tasks`` a sweep polled (re-scheduled into the future), per agent."""
    now = timezone.now()
    return Counter(
        t.agent_id for t in Task.objects.filter(pk__in=[t.pk for t in tasks], next_poll_at__gt=now)
    )


@pytest.fixture
def two_agents(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> Any:
    """Polled WORKING tasks at two agents (same peer): ``make(n_one, n_two)``, every task
    due, agent-one's the oldest due and (their intervals equal) the longest unseen."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # each task polled on its own
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    make_agent(skills=[skill], a2a_endpoint=peer.url, id="agent-two", name="Agent Two")
    user = make_user()

    def make(n_one: int, n_two: int) -> tuple[list[Task], list[Task]]:
        one = working_tasks(n_one, user, peer, make_agent, skill)
        two = working_tasks(n_two, user, peer, make_agent, skill, agent_id="agent-two")
        now = timezone.now()
        for age, task in enumerate(reversed(one + two)):
            Task.objects.filter(pk=task.pk).update(next_poll_at=now - timedelta(seconds=age))
        # A polled task is due again only in 30 s: a slow machine cannot make it due
        # again before the test counts it.
        settings.A2A_POLL_INTERVAL = 30.0
        return one, two

    return make


def test_a_sweep_polls_an_agent_at_most_its_rate_over_all_its_batches(
    settings: Any, two_agents: Any
) -> None:
    """A2A_AGENT_POLL_RATE holds per sweep, not per batch: batches that each stay within
    it must not add up past it (they did while every batch came back full)."""
    one, two = two_agents(3, 3)
    settings.A2A_AGENT_POLL_RATE, settings.A2A_SWEEP_INTERVAL = 1.0, 1.0
    settings.A2A_POLL_ENGINE_BATCH, settings.A2A_POLL_SWEEP_MAX = 2, 100
    swept = worker.sweep()
    # The engine's two polls, and none of the others one by one (the sweep's claim of due
    # sends and cancels took them, past the agents' rate).
    assert (swept["polled"], swept["processed"]) == (2, 0)
    assert polled_by_agent(one + two) == {"agent-one": 1, "agent-two": 1}
    assert worker.sweep()["polled"] == 2  # the next sweep, the next share
    assert polled_by_agent(one + two) == {"agent-one": 2, "agent-two": 2}


def test_an_agents_backlog_does_not_hide_the_others_due_polls(
    settings: Any, two_agents: Any
) -> None:
    """An agent with more due polls than a batch searches (older than anyone's) uses its
    budget; the sweep searches again without it and finds the other agent's."""
    one, two = two_agents(9, 1)
    settings.A2A_AGENT_POLL_RATE, settings.A2A_SWEEP_INTERVAL = 1.0, 1.0
    # A batch of 2 searches 8 due polls, the longest unseen: all agent-one's.
    settings.A2A_POLL_ENGINE_BATCH, settings.A2A_POLL_SWEEP_MAX = 2, 100
    assert worker.sweep()["polled"] == 2
    assert polled_by_agent(one + two) == {"agent-one": 1, "agent-two": 1}


def test_the_task_seen_longest_ago_is_polled_first(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """Behind on its polls, the engine takes the task unseen the longest (its last poll:
    ``next_poll_at`` less its interval) before the one due the longest: a task at the cap
    before a young one polled every second, although the young one is more overdue."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # each task polled on its own
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    young, capped = working_tasks(2, make_user(), peer, make_agent, skill)
    now = timezone.now()
    # Last seen 4 s ago (due 3 s ago), and 11 s ago (due 1 s ago).
    Task.objects.filter(pk=young.pk).update(
        next_poll_at=now - timedelta(seconds=3), poll_interval=1
    )
    Task.objects.filter(pk=capped.pk).update(
        next_poll_at=now - timedelta(seconds=1), poll_interval=10
    )
    settings.A2A_POLL_INTERVAL = 30.0  # the polled one is not due again before the check
    assert engine.poll_due(1) == 1
    polled = Task.objects.filter(pk__in=[young.pk, capped.pk], next_poll_at__gt=timezone.now())
    assert list(polled.values_list("pk", flat=True)) == [capped.pk]
    assert engine.poll_due(1) == 1  # the young one's turn comes next
    assert polled.count() == 2


def test_an_end_is_applied_while_the_batchs_later_calls_are_still_out(
    settings: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """News found by a batch's first call is applied as its answer comes, not after the
    batch's slowest call: here the second call is held until the first task's end is in
    the database (or 3 s pass, which fails the test)."""
    import threading
    import time

    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # each task polled on its own
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    user = make_user()
    (held,) = working_tasks(1, user, peer, make_agent, skill)
    ending = creation.create_task(
        skill_id=skill.id, input={"product": "lamp", "behaviour": "slow", "seconds": 0.1}, user=user
    )
    worker.process_task(ending.pk)
    time.sleep(0.4)  # it has ended at the agent
    now = timezone.now()
    # The ending task unseen the longest: its call goes first.
    Task.objects.filter(pk=ending.pk).update(next_poll_at=now - timedelta(seconds=5))
    Task.objects.filter(pk=held.pk).update(next_poll_at=now)
    release, calls = threading.Event(), []
    call = engine._call

    def held_back(polled: engine.Polled) -> engine.Polled:
        calls.append(polled.task.pk)
        if polled.task.pk == held.pk:
            release.wait(3)
        return call(polled)

    monkeypatch.setattr(engine, "_call", held_back)

    def poll() -> None:
        try:
            engine.poll_due(10)
        finally:
            connection.close()

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        ended = Task.objects.filter(pk=ending.pk, state=TaskState.COMPLETED)
        deadline = time.monotonic() + 3
        while not ended.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        applied_early = ended.exists() and not release.is_set()
    finally:
        release.set()
        thread.join(10)
    assert calls == [ending.pk, held.pk]
    assert applied_early, "the end waited for the batch's held call"
    held.refresh_from_db()
    assert held.state == TaskState.WORKING  # quiet: re-scheduled
    assert held.next_poll_at > now
