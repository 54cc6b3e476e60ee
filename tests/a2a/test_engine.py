"""The batched poll engine: fair claims, quiet answers re-scheduled together, Retry-After
obeyed for all of an agent's tasks, and the usual per-task rules for everything else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import engine, services
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_picks_round_robin_between_agents_within_each_agents_share() -> None:
    candidates = [(f"a{i}", "a") for i in range(6)] + [("b0", "b"), ("c0", "c"), ("c1", "c")]
    assert engine.pick_fairly(candidates, limit=5, per_agent=10) == ["a0", "b0", "c0", "a1", "c1"]
    assert engine.pick_fairly(candidates, limit=10, per_agent=2) == ["a0", "b0", "c0", "a1", "c1"]
    assert engine.pick_fairly([], limit=5, per_agent=2) == []


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
        task = services.create_task(
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
    tasks, lease = engine.claim_polls(10)
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
    task = services.create_task(
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
