"""Polled tasks followed by listing: one ``ListTasks`` per agent tells what changed.

Against real a2a-sdk agents: a task followed to its end by listings alone (its own polls
spaced to the safety interval), one request per agent and interval, the cursor resting
and starting again, and the guarantees: one worker per agent's listing, a listed task
applied only to that agent's platform task, never a regression.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_listing, agent_push_body, creation, listing_models, services
from a2a.listing_models import AgentListing
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from a2a.worker import process_task
from tests.a2a.listing.support import listed_now, start
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_is_followed_to_its_end_by_listings_alone(setup: Any, peer: TestAgent) -> None:
    task = start(setup, "slow", seconds=0.3)
    assert task.metadata["followedBy"] == "list"
    assert task.next_action == NextAction.POLL
    # Its own polls are the safety net only.
    assert task.next_poll_at >= timezone.now() + timedelta(seconds=50)
    row = AgentListing.objects.get(pk="agent-one")
    assert row.next_at is not None
    # Due, from before the agent took the send (its answer's Date, less the call).
    placed = row.since
    assert placed is not None
    assert placed <= timezone.now() - timedelta(seconds=1)
    time.sleep(0.6)
    assert listed_now() == 1
    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert peer.requests_for(task.remote_task_id) == 0  # no GetTask
    assert TaskEvent.objects.filter(task=task, reason__contains="via list").exists()
    row.refresh_from_db()
    # The cursor is in the agent's clock: its newest status time, less the overlap (it
    # never moves back: here the send's answer had placed it later than that).
    completed_at = agent_push_body.status_time({"timestamp": task.metadata["agentStatusAt"]})
    assert row.since == max(placed, completed_at - agent_listing.OVERLAP)
    assert row.overlap == agent_listing.OVERLAP.total_seconds()
    assert row.lease_until is None


def test_listings_cost_one_request_per_agent_not_per_task(setup: Any, peer: TestAgent) -> None:
    tasks = [start(setup) for _ in range(5)]
    listed_now()  # probe and first listing: WORKING applied to each
    peer.reset()
    listed_now()
    assert peer.counts["/tasks"] == 1
    for task in tasks:
        task.refresh_from_db()
        assert task.state == TaskState.WORKING
        assert peer.requests_for(task.remote_task_id) == 0


def test_the_next_sweep_lists_the_agent_again(setup: Any, settings: Any) -> None:
    """One listing per interval, not two: the sweep one interval later finds the agent
    due even when it reaches the listing step a little earlier in its pass (counted from
    the listing's end, it waited for the sweep after). A slow listing still rests."""
    settings.A2A_SWEEP_INTERVAL = 1.0
    start(setup)  # a working task: the agent has something in flight
    before = timezone.now()
    assert listed_now() == 1
    after = timezone.now()  # due an interval after the listing's end, it would be 1 s on
    row = AgentListing.objects.get(pk="agent-one")
    assert row.next_at is not None
    assert before + timedelta(seconds=0.5) <= row.next_at <= after + timedelta(seconds=0.8)
    slow = agent_listing.next_listing_at(before, before + timedelta(seconds=0.9))
    assert slow == before + timedelta(seconds=1.4)  # half an interval after it ended


def test_the_cursor_rests_when_nothing_is_in_flight_and_starts_again(
    setup: Any, peer: TestAgent
) -> None:
    task = start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    AgentListing.objects.filter(pk="agent-one").update(followed_at=timezone.now() - timedelta(60))
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    row = AgentListing.objects.get(pk="agent-one")
    assert (row.next_at, row.since) == (None, None)  # resting: no more requests
    peer.reset()
    assert agent_listing.list_due() == 0
    assert peer.total == 0
    listing_models.forget()  # this process's last follow was long ago
    start(setup)
    assert AgentListing.objects.get(pk="agent-one").next_at is not None


def test_a_task_sent_while_the_listing_ran_keeps_it_going(setup: Any) -> None:
    start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    listed_now()  # the task completed, but a follow was recorded just now
    assert AgentListing.objects.get(pk="agent-one").next_at is not None


def test_two_workers_never_list_one_agent_at_once(setup: Any) -> None:
    start(setup)
    now = timezone.now()
    lease = now + timedelta(seconds=30)
    assert len(AgentListing.claim_due(now, lease)) == 1
    assert AgentListing.claim_due(now, lease) == []
    # A worker killed mid-listing: its lease runs out, and another lists again.
    later = lease + timedelta(seconds=1)
    assert len(AgentListing.claim_due(later, later + timedelta(seconds=30))) == 1


def test_a_listed_task_changes_only_that_agents_task(
    setup: Any, make_agent: Any, peer: TestAgent
) -> None:
    mine = start(setup, "slow", seconds=0.1)
    other = creation.create_task(
        skill_id="ce-review", input={"product": "lamp"}, user=setup, agent_id="agent-one"
    )
    make_agent(id="agent-two", skills=[mine.skill], a2a_endpoint="http://127.0.0.1:9/")
    # Another agent's task that happens to carry the same remote id.
    Task.objects.filter(pk=other.pk).update(
        agent_id="agent-two", remote_task_id=mine.remote_task_id, next_action=NextAction.POLL
    )
    time.sleep(0.3)
    listed_now()
    mine.refresh_from_db()
    other.refresh_from_db()
    assert mine.state == TaskState.COMPLETED
    assert other.state == TaskState.SUBMITTED


def test_a_listing_never_takes_a_task_back(setup: Any, peer: TestAgent) -> None:
    task = start(setup, "ask")
    time.sleep(0.2)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    # The platform holds a newer status than the agent lists (a person's answer is on its
    # way): the listed one is older and changes nothing.
    newer = (timezone.now() + timedelta(hours=1)).isoformat()
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, metadata={**task.metadata, "agentStatusAt": newer}
    )
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.WORKING


def test_a_question_answered_is_not_asked_again_by_a_later_listing(setup: Any) -> None:
    task = start(setup, "ask")
    time.sleep(0.2)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    services.reply_to_task(task, text="EU")
    # The next listing shows the question again (the cursor overlaps the last listing)
    # before the agent has the answer: the mapping knows it as the one answered.
    listed_now()
    task.refresh_from_db()
    assert task.state != TaskState.INPUT_REQUIRED
    if task.next_action == NextAction.SEND:
        process_task(task.pk)  # the answer goes to the agent
    time.sleep(0.2)
    listed_now()
    task.refresh_from_db()
    assert (task.state, task.output["answer"]) == (TaskState.COMPLETED, "EU")
    asked = TaskEvent.objects.filter(task=task, to_state=TaskState.INPUT_REQUIRED).count()
    assert asked == 1


def test_listings_due_go_between_a_sweeps_poll_batches(
    setup: Any, settings: Any, monkeypatch: Any
) -> None:
    from a2a import worker

    settings.A2A_POLL_ENGINE_BATCH = 1
    tasks = [start(setup) for _ in range(3)]
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(next_poll_at=timezone.now())
    calls: list[int] = []
    monkeypatch.setattr(agent_listing, "list_due", lambda: calls.append(1) or 0)
    assert worker._poll_batches() == 3
    assert len(calls) >= 2  # after each full batch
