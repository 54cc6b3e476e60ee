"""Agents whose tasks cannot be followed by listing go back to polling, at once: listings
that are not A2A or 404, a busy agent (tried again later), statuses without time, listings
that skip changes at the widest overlap, an agent that now speaks A2A 0.3, listing off.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_listing, engine
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import TaskState
from a2a.transports.base import AgentReply
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentProfile
from tests.a2a.listing.support import listed_now, start
from tests.a2a.test_remote_task_ids import answers_about
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_a_busy_listing_pauses_the_agents_sends_and_a_paused_agent_is_not_listed(
    make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """The listing's Retry-After is the agent's, as a poll's or a send's: its sends wait
    for it too; and a pause a poll or a send asked for holds the listing (before, the
    listing went on, each sweep, through the pause)."""
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("busylist"), card_read_at=timezone.now())
    user = make_user()
    start(user)
    sends = peer.sends
    listed_now()
    assert AgentPause.objects.get(agent_id="agent-one").until >= timezone.now() + timedelta(
        seconds=6
    )
    waiting = start(user)
    assert peer.sends == sends  # not sent: it waits for the pause
    assert waiting.next_poll_at >= timezone.now() + timedelta(seconds=6)
    # Due again meanwhile, the listing waits for the pause too.
    lists = peer.counts["/x/busylist/tasks"]
    assert listed_now() == 0
    assert peer.counts["/x/busylist/tasks"] == lists
    AgentPause.objects.all().delete()
    assert listed_now() == 1
    assert peer.counts["/x/busylist/tasks"] == lists + 1


def test_a_change_without_a_status_time_stops_the_listing(setup: Any, peer: TestAgent) -> None:
    task = start(setup)
    polled = engine.Polled(task, call_target(task.agent))
    undated = {"id": task.remote_task_id, "status": {"state": TaskState.COMPLETED}}
    agent_listing.check_poll(task, polled.target, AgentReply(task=undated))
    assert AgentProfile.objects.get(pk="agent-one").listing is False
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
    dated = {**undated, "status": {**undated["status"], "timestamp": "2026-01-01T00:00:00Z"}}
    AgentProfile.objects.filter(pk="agent-one").update(listing=True)
    task.agent.refresh_from_db()
    agent_listing.check_poll(task, call_target(task.agent), AgentReply(task=dated))
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
    reply = AgentReply(task=dated)
    agent_listing.check_poll(task, call_target(task.agent), reply)


def test_a_change_shown_late_widens_the_overlap_and_lists_again(setup: Any) -> None:
    task = start(setup)
    stamp = timezone.now() - timedelta(seconds=8)
    # The listings have not passed that time yet: not a miss.
    AgentListing.objects.filter(pk="agent-one").update(since=stamp - timedelta(seconds=1))
    reply = {"id": task.remote_task_id, "status": {"state": TaskState.COMPLETED}}
    reply["status"]["timestamp"] = stamp.isoformat()
    agent_listing.check_poll(task, call_target(task.agent), AgentReply(task=reply))
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


def test_an_agent_that_now_speaks_03_has_its_tasks_polled_at_once(setup: Any) -> None:
    task = start(setup)
    assert task.next_poll_at > timezone.now() + timedelta(seconds=30)
    AgentProfile.objects.filter(pk="agent-one").update(protocol_version="0.3", interface={})
    assert listed_now() == 0
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
    assert AgentListing.objects.get(pk="agent-one").next_at is None


def test_a_poll_answered_about_another_task_moves_no_listing_cursor(
    setup: Any, peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is refused (``not_a2a``); the other task's old status time is not taken
    for a change the listings missed (which would send the cursor back, widen the
    overlap and, repeated, turn listing off for the agent)."""
    other = start(setup, "complete")
    assert other.state == TaskState.COMPLETED
    task = start(setup)
    assert task.metadata["followedBy"] == "list"
    time.sleep(1.1)  # the listings pass the other task's status time
    listed_now()
    before = AgentListing.objects.filter(pk="agent-one").values().get()
    assert before["since"] is not None
    answers_about(monkeypatch, other.remote_task_id)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    engine.poll_due(10)
    task.refresh_from_db()
    assert task.error["code"] == "not_a2a"
    assert AgentListing.objects.filter(pk="agent-one").values().get() == before
    assert AgentProfile.objects.get(pk="agent-one").listing is True


def test_a_listing_given_up_while_the_send_was_out_does_not_leave_the_task_waiting(
    setup: Any, peer: TestAgent
) -> None:
    """The listing that found the agent cannot be listed moved its tasks' polls to now, but
    not the first task's: its send was still out (the row leased). The send's answer,
    recorded with the target read before the call, must not then space the task's polls
    as a listed task's (a minute), as one CI run showed with the reference Node agent."""
    task = start(setup)  # sent, and its next poll spaced as a listed task's
    stale = call_target(task.agent)  # read before the give-up
    assert agent_listing.follows(task, stale)
    assert task.next_poll_at > timezone.now() + timedelta(seconds=30)
    AgentProfile.objects.filter(pk="agent-one").update(listing=False)  # the give-up
    agent_listing.cover_send(task, stale, AgentReply(task={"id": "x"}), 0.1)
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
