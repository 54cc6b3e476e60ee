"""Polled tasks followed by listing: one ``ListTasks`` per agent tells what changed.

Against real a2a-sdk agents (HTTP+JSON and JSON-RPC): the transports' listing, a task
followed to its end by listings alone (its own polls spaced to the safety interval), the
cursor in the agent's clock, agents that cannot be listed (404, non-A2A answers, A2A 0.3,
statuses without time) going back to polling at once, and the guarantees: one worker per
agent's listing, a listed task applied only to that agent's platform task, never a
regression.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_listing, agent_push_body, engine, listing_models, services, transports
from a2a.listing_models import AgentListing
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from a2a.worker import process_task
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentProfile
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def listing_on(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 1.0
    settings.A2A_LIST_POLL_INTERVAL = 60.0


def start(user: Any, behaviour: str = "working", **extra: Any) -> Task:
    task = services.create_task(
        skill_id="ce-review", input={"product": "lamp", "behaviour": behaviour, **extra}, user=user
    )
    process_task(task.pk)
    task.refresh_from_db()
    return task


def listed_now(agent_id: str = "agent-one") -> int:
    """Make the agent's listing due and run the sweep's listing step."""
    AgentListing.objects.filter(pk=agent_id).update(next_at=timezone.now())
    return agent_listing.list_due()


@pytest.fixture
def setup(make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent) -> Any:
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    return make_user()


# --- following by listing ---------------------------------------------------------------------


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
    other = services.create_task(
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


# --- agents that cannot be listed -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nolist", "badlist"])
def test_an_agent_that_cannot_be_listed_goes_back_to_polling(
    mode: str, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url_for(mode), card_read_at=timezone.now())
    user = make_user()
    task = start(user, "slow", seconds=0.1)
    assert task.metadata["followedBy"] == "list"
    listed_now()
    profile = AgentProfile.objects.get(pk="agent-one")
    assert profile.listing is False
    assert profile.no_listing_reason
    assert AgentListing.objects.get(pk="agent-one").next_at is None
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()  # polled at once
    time.sleep(0.2)
    engine.poll_due(10)
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    # From now on its tasks are polled one by one.
    later = start(user)
    assert later.metadata["followedBy"] == "poll"
    assert later.next_poll_at < timezone.now() + timedelta(seconds=5)


def test_a_busy_listing_is_tried_again_later_from_the_same_point(
    make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("busylist"), card_read_at=timezone.now())
    start(make_user())
    placed = AgentListing.objects.get(pk="agent-one").since
    listed_now()
    row = AgentListing.objects.get(pk="agent-one")
    assert AgentProfile.objects.get(pk="agent-one").listing is True
    assert row.since == placed
    assert row.lease_until is None
    assert row.next_at >= timezone.now() + timedelta(seconds=6)  # its Retry-After


def test_a_change_without_a_status_time_stops_the_listing(setup: Any, peer: TestAgent) -> None:
    task = start(setup)
    polled = engine.Polled(task, call_target(task.agent))
    undated = {"id": task.remote_task_id, "status": {"state": TaskState.COMPLETED}}
    agent_listing.check_poll(task, polled.target, transports.AgentReply(task=undated))
    assert AgentProfile.objects.get(pk="agent-one").listing is False
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
    dated = {**undated, "status": {**undated["status"], "timestamp": "2026-01-01T00:00:00Z"}}
    AgentProfile.objects.filter(pk="agent-one").update(listing=True)
    task.agent.refresh_from_db()
    agent_listing.check_poll(task, call_target(task.agent), transports.AgentReply(task=dated))
    assert AgentProfile.objects.get(pk="agent-one").listing is True


def test_listing_off_polls_every_task(setup: Any, settings: Any) -> None:
    settings.A2A_LIST_INTERVAL = 0
    task = start(setup)
    assert task.metadata["followedBy"] == "poll"
    assert task.next_poll_at < timezone.now() + timedelta(seconds=5)
    assert not AgentListing.objects.exists()


def missed_once(task: Task, stamp: datetime) -> None:
    """A listing passed ``stamp`` (the cursor is now), then a poll found that change."""
    AgentListing.objects.filter(pk="agent-one").update(since=timezone.now())
    dated = {"id": task.remote_task_id, "status": {"state": TaskState.COMPLETED}}
    dated["status"]["timestamp"] = stamp.isoformat()
    reply = transports.AgentReply(task=dated)
    agent_listing.check_poll(task, call_target(task.agent), reply)


def test_a_change_shown_late_widens_the_overlap_and_lists_again(setup: Any) -> None:
    task = start(setup)
    stamp = timezone.now() - timedelta(seconds=8)
    # The listings have not passed that time yet: not a miss.
    AgentListing.objects.filter(pk="agent-one").update(since=stamp - timedelta(seconds=1))
    reply = {"id": task.remote_task_id, "status": {"state": TaskState.COMPLETED}}
    reply["status"]["timestamp"] = stamp.isoformat()
    agent_listing.check_poll(task, call_target(task.agent), transports.AgentReply(task=reply))
    assert AgentListing.objects.get(pk="agent-one").overlap == 5.0
    # They had: the agent showed the change late. The cursor goes back before it (the
    # agent's other changes of that time are listed again) and the overlap widens.
    missed_once(task, stamp)
    row = AgentListing.objects.get(pk="agent-one")
    assert row.since == stamp - timedelta(seconds=1)
    assert row.overlap >= 13.0  # at least the lateness seen, on top of the overlap
    assert row.misses == 0
    assert AgentProfile.objects.get(pk="agent-one").listing is True


def test_listings_that_skip_changes_at_the_widest_overlap_stop(setup: Any) -> None:
    task = start(setup)
    stamp = timezone.now() - timedelta(days=1)
    missed_once(task, stamp)  # widened to the widest at once: it was a day late
    assert AgentListing.objects.get(pk="agent-one").overlap == agent_listing.WIDEST
    for _ in range(agent_listing.MISSES - 1):
        missed_once(task, stamp)
    assert AgentProfile.objects.get(pk="agent-one").listing is True
    missed_once(task, stamp)
    profile = AgentProfile.objects.get(pk="agent-one")
    assert profile.listing is False
    assert "left out" in profile.no_listing_reason


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


def test_a_listing_cut_short_keeps_its_cursor(setup: Any, monkeypatch: Any) -> None:
    for _ in range(3):
        start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    listed_now()  # a first listing places the cursor
    monkeypatch.setattr(agent_listing, "PAGE_SIZE", 1)
    monkeypatch.setattr(agent_listing, "MAX_PAGES", 2)
    start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    # No overlap, so a listing read to its end would move the cursor to the newest status
    # time it saw (this last task's end). Read just before the listing: the send's answer
    # may have moved it back (its Date can lag a second behind the agent's clock).
    AgentListing.objects.filter(pk="agent-one").update(overlap=0.0)
    placed = AgentListing.objects.get(pk="agent-one").since
    assert placed is not None
    listed_now()  # more changes than two pages of one: cut short
    assert AgentListing.objects.get(pk="agent-one").since == placed


def test_a_send_answered_with_the_end_leaves_the_cursor(setup: Any) -> None:
    # The answer ended the task: nothing of it is left to list, so no write moves the
    # cursor back (an instant task costs no UPDATE of its agent's listing).
    ahead = timezone.now() + timedelta(hours=1)
    AgentListing.objects.create(agent_id="agent-one", since=ahead, next_at=timezone.now())
    task = start(setup, "complete")
    assert (task.state, task.metadata["followedBy"]) == (TaskState.COMPLETED, "list")
    assert AgentListing.objects.get(pk="agent-one").since == ahead


def test_a_send_answered_late_moves_the_cursor_back_before_it(setup: Any) -> None:
    # A listing passed the agent's changes before the platform recorded the send's answer
    # (a loaded platform): the cursor is already past them.
    ahead = timezone.now() + timedelta(hours=1)
    AgentListing.objects.create(agent_id="agent-one", since=ahead, next_at=timezone.now())
    task = start(setup, "slow", seconds=0.2)
    since = AgentListing.objects.get(pk="agent-one").since
    assert since <= timezone.now() - timedelta(seconds=1)  # the answer's Date, less the call
    assert since >= timezone.now() - timedelta(seconds=10)
    time.sleep(0.4)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED  # listed again, so not left to the safety poll


def test_a_cursor_moved_back_during_a_listing_stays_back(make_agent: Any) -> None:
    make_agent()
    now = timezone.now()
    AgentListing.objects.create(agent_id="agent-one", since=now, next_at=now)
    (row,) = AgentListing.claim_due(now, now + timedelta(seconds=30))
    back = now - timedelta(seconds=30)
    AgentListing.cover("agent-one", back)  # a send's answer, while the listing ran
    assert row.listed(now + timedelta(seconds=5), now + timedelta(seconds=1))
    assert AgentListing.objects.get(pk="agent-one").since == back
    # Without a move meanwhile, the listing's own point is stored.
    (row,) = AgentListing.claim_due(now + timedelta(seconds=2), now + timedelta(seconds=30))
    assert row.listed(now + timedelta(seconds=5), now + timedelta(seconds=1))
    assert AgentListing.objects.get(pk="agent-one").since == now + timedelta(seconds=5)


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


def test_an_agent_that_now_speaks_03_has_its_tasks_polled_at_once(setup: Any) -> None:
    task = start(setup)
    assert task.next_poll_at > timezone.now() + timedelta(seconds=30)
    AgentProfile.objects.filter(pk="agent-one").update(protocol_version="0.3", interface={})
    assert listed_now() == 0
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
    assert AgentListing.objects.get(pk="agent-one").next_at is None
