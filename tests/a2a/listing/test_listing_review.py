"""An honest agent's listing that cannot read everything in one go (a burst of changes past
``MAX_PAGES``, slow pages, a sweep busy with other agents) is not taken for a listing that
never ends; no call of a listing outlives its row's lease, and a sweep that lost the lease
gives no verdict; an agent whose "no listing" mark is cleared has its tasks in flight
listed again at once. Fake clocks and small numbers: no test waits for a budget.
"""

# The hostile agent's fixtures come from hostile_setup: the tests' parameters name them.
# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import timedelta
from itertools import count
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from a2a import agent_listing, agent_push_body, engine, listing_fetch
from a2a.claims import lease_seconds
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.states import TaskState
from a2a.worker import process_task
from agent_profiles.deadlines import whole_answer_seconds
from agent_profiles.models import AgentProfile
from tests.a2a.listing.hostile_setup import (  # noqa: F401  (fixtures)
    DONE,
    agent,
    cursor,
    hostile,
    mark_then_clear,
    profile,
    sent,
    user,
)
from tests.a2a.listing.support import listed_now
from tests.support.hostile_agent import HostileAgent, hostile_agent

pytestmark = pytest.mark.django_db(transaction=True)


def honest(peer: HostileAgent, per_page: Any = None) -> Any:
    """A ListTasks that applies statusTimestampAfter, newest first, offset pages of
    pageSize: its pages end."""

    def handler(query: dict[str, list[str]]) -> Any:
        if per_page is not None:
            per_page()
        after = agent_push_body.status_time({"timestamp": query["statusTimestampAfter"][0]})
        size = int(query["pageSize"][0])
        start = int(query.get("pageToken", ["0"])[0] or 0)
        tasks = [
            t for t in peer.tasks.values() if agent_push_body.status_time(t["status"]) >= after
        ]
        tasks.sort(key=lambda t: agent_push_body.status_time(t["status"]), reverse=True)
        token = str(start + size) if start + size < len(tasks) else ""
        return peer.page(tasks[start : start + size], token)

    return handler


def burst(peer: HostileAgent, tasks: int) -> None:
    """``tasks`` other tasks of the agent changed just now (a millisecond apart)."""
    base = timezone.now()
    for n in range(tasks):
        stamp = (base + timedelta(milliseconds=n)).isoformat()
        peer.tasks[f"b-{n}"] = {
            "id": f"b-{n}",
            "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": stamp},
        }


def newest(peer: HostileAgent) -> Any:
    return max(agent_push_body.status_time(t["status"]) for t in peer.tasks.values())


def spaced(task: Task) -> None:
    """The task's poll as a listed task's: the safety net's minute away."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now() + timedelta(minutes=1))


# --- 1. a listing cut by its pages or its budget is not the agent's fault ------------------


def test_an_honest_burst_past_the_pages_is_not_marked_and_the_cursor_moves_on(
    user: Any, hostile: HostileAgent, monkeypatch: Any
) -> None:
    monkeypatch.setattr(listing_fetch, "PAGE_SIZE", 2)
    monkeypatch.setattr(listing_fetch, "MAX_PAGES", 3)
    task = sent(user)
    hostile.list_handler = honest(hostile)
    listed_now()  # placed
    AgentListing.objects.filter(pk="agent-one").update(overlap=0.5)
    placed = cursor().since
    burst(hostile, 2 * 3 + 1)  # one change more than the pages hold
    for _ in range(agent_listing.TRUNCATIONS):
        spaced(task)
        before = hostile.listings()
        listed_now()
        assert hostile.listings() - before == 3  # cut by MAX_PAGES
        task.refresh_from_db()
        # What the cut left unread (the oldest changes) is covered by the task's poll.
        assert task.next_poll_at <= timezone.now()
        assert (profile().listing, cursor().truncations) == (True, 0)
    # Moved on to the newest status time read, less the overlap: not the same burst again.
    assert cursor().since == newest(hostile) - timedelta(seconds=0.5)
    assert cursor().since > placed
    assert profile().no_listing_reason == ""


def test_a_slow_honest_agent_is_not_marked(
    user: Any, hostile: HostileAgent, monkeypatch: Any
) -> None:
    now = [0.0]
    monkeypatch.setattr(listing_fetch, "clock", lambda: now[0])
    monkeypatch.setattr(listing_fetch, "PAGE_SIZE", 2)
    task = sent(user)
    listed_now()
    burst(hostile, 20)  # ten pages; each takes a third of the budget (the fake clock)

    def slow() -> None:
        now[0] += listing_fetch.budget() / 3 + 0.01

    hostile.list_handler = honest(hostile, slow)
    for _ in range(agent_listing.TRUNCATIONS):
        spaced(task)
        before = hostile.listings()
        listed_now()
        assert hostile.listings() - before == 3  # the budget spent: cut
        task.refresh_from_db()
        assert task.next_poll_at <= timezone.now()
    assert (profile().listing, cursor().truncations, cursor().lease_until) == (True, 0, None)


def test_a_failed_listing_breaks_a_run_of_endless_ones(user: Any, hostile: HostileAgent) -> None:
    sent(user)
    tokens = count()

    def endless(query: dict[str, list[str]]) -> Any:
        return hostile.page(list(hostile.tasks.values()), f"t{next(tokens)}")

    error = json.dumps({"error": {"code": 503, "message": "busy"}}).encode()
    hostile.list_handler = endless
    listed_now()
    assert cursor().truncations == 1
    hostile.list_handler = lambda query: (503, {}, error)
    listed_now()
    assert (cursor().failures, cursor().truncations) == (1, 0)
    hostile.list_handler = endless
    for _ in range(agent_listing.TRUNCATIONS - 1):
        listed_now()
    # Endless, failed, endless, endless: two in a row, not three.
    assert (profile().listing, cursor().truncations) == (True, agent_listing.TRUNCATIONS - 1)


# --- 2. the sweep's load is not the agent's -------------------------------------------------


def test_the_sweeps_load_does_not_count_against_an_honest_agent(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any
) -> None:
    # One pool thread: agent-b's listing waits for agent-a's, which takes most of the
    # budget (the fake clock). agent-b's own pages end.
    settings.A2A_POLL_CONCURRENCY = 1
    monkeypatch.setattr(engine, "_pool", None)
    now = [0.0]
    monkeypatch.setattr(listing_fetch, "clock", lambda: now[0])
    skill = make_skill(id="ce-review")
    user = make_user()
    order: list[str] = []
    fetch = agent_listing.fetch
    monkeypatch.setattr(
        agent_listing,
        "fetch",
        lambda listing: order.append(listing.target.agent_id) or fetch(listing),
    )
    with hostile_agent() as slow, hostile_agent() as fine:
        for agent_id, agent in (("agent-a", slow), ("agent-b", fine)):
            make_agent(
                id=agent_id, skills=[skill], a2a_endpoint=agent.url, card_read_at=timezone.now()
            )
        sent(user, "agent-a")
        mine = fine.tasks[sent(user, "agent-b").remote_task_id]

        def most_of_the_budget(query: dict[str, list[str]]) -> Any:
            now[0] += listing_fetch.budget() * 0.995
            return slow.page([])

        def two_pages(query: dict[str, list[str]]) -> Any:
            now[0] += listing_fetch.budget() * 0.01
            if query.get("pageToken", [""])[0]:
                return fine.page([mine])
            return fine.page([{**mine, "id": "other"}], "p2")

        slow.list_handler = most_of_the_budget
        fine.list_handler = two_pages
        try:
            for _ in range(agent_listing.TRUNCATIONS):
                AgentListing.objects.update(next_at=timezone.now())
                assert agent_listing.list_due() == 2
        finally:
            engine._pool.shutdown()
    assert order.count("agent-b") == agent_listing.TRUNCATIONS
    b = AgentProfile.objects.get(pk="agent-b")
    assert (b.listing, b.no_listing_reason) == (True, "")
    assert AgentListing.objects.get(pk="agent-b").truncations == 0


def test_a_listings_budget_runs_from_its_start_within_its_claims(
    user: Any, hostile: HostileAgent, monkeypatch: Any
) -> None:
    now = [100.0]
    monkeypatch.setattr(listing_fetch, "clock", lambda: now[0])
    sent(user)
    listed_now()
    began = timezone.now()
    AgentListing.objects.filter(pk="agent-one").update(next_at=began)
    (row,) = AgentListing.claim_due(began, began + timedelta(seconds=lease_seconds()))
    target = agent_listing.agent_registry.target_for(row.agent)
    alone = listing_fetch.fetch(listing_fetch.Listing(row, target))
    assert alone.deadline == 100.0 + listing_fetch.budget()  # its own, from its start
    capped = listing_fetch.fetch(listing_fetch.Listing(row, target, deadline=101.0))
    assert capped.deadline == 101.0  # never past what its claim allows


# --- 3. no call outlives the row's lease; a sweep that lost it gives no verdict -------------


def test_the_budget_leaves_one_whole_call_under_the_lease() -> None:
    call = whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
    assert listing_fetch.budget() + call <= lease_seconds()


def test_a_lease_barely_over_one_calls_timeouts_still_holds_the_last_page(
    user: Any, hostile: HostileAgent, settings: Any, monkeypatch: Any
) -> None:
    # A task's lease covers its call's timeouts (3 s + 2), not the slack of its answer's
    # body (2 s more): the budget's floor plus one whole call was past the row's lease.
    sent(user)
    listed_now()
    settings.A2A_HTTP_TIMEOUT = 2.0
    settings.A2A_CONNECT_TIMEOUT = 1.0
    settings.A2A_LEASE_SECONDS = 5.0
    held: list[float] = []
    fetch = agent_listing.fetch

    def spy(listing: Any) -> Any:
        held.append((listing.row.lease_until - timezone.now()).total_seconds())
        return fetch(listing)

    monkeypatch.setattr(agent_listing, "fetch", spy)
    listed_now()
    call = whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
    assert listing_fetch.budget() >= 1.0
    assert held[0] >= listing_fetch.budget() + call


@pytest.mark.parametrize("how", ["not A2A", "endless"])
def test_a_sweep_that_lost_the_lease_gives_no_verdict(
    how: str, user: Any, hostile: HostileAgent, monkeypatch: Any
) -> None:
    task = sent(user)
    spaced(task)
    AgentListing.objects.filter(pk="agent-one").update(truncations=agent_listing.TRUNCATIONS - 1)
    tokens = count()
    if how == "not A2A":
        hostile.list_handler = lambda query: hostile.page(list(hostile.tasks.values()), "again")
    else:
        hostile.list_handler = lambda query: hostile.page(
            list(hostile.tasks.values()), f"t{next(tokens)}"
        )
    fetch = agent_listing.fetch
    taken = timezone.now() + timedelta(minutes=5)

    def lost(listing: Any) -> Any:
        done = fetch(listing)
        # Its lease ran out while it paged, and another sweep claimed the row.
        AgentListing.objects.filter(pk="agent-one").update(lease_until=taken)
        return done

    monkeypatch.setattr(agent_listing, "fetch", lost)
    listed_now()
    assert (profile().listing, profile().no_listing_reason) == (True, "")
    row = cursor()
    assert (row.lease_until, row.truncations) == (taken, agent_listing.TRUNCATIONS - 1)
    task.refresh_from_db()
    assert task.next_poll_at > timezone.now() + timedelta(seconds=30)  # left as it was


# --- 4. the mark cleared: the tasks in flight are listed again at once ----------------------


@pytest.mark.parametrize("how", ["register", "refresh"])
def test_tasks_in_flight_are_listed_again_once_the_mark_is_cleared(
    how: str, agent: Any, user: Any, hostile: HostileAgent
) -> None:
    task = sent(user)
    mark_then_clear(how, agent, hostile)
    assert profile().listing
    assert cursor().next_at is not None  # its listing started again, no send needed
    # Its poll (due since the give-up) finds it working: spaced as a listed task's again.
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    process_task(task.pk)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.next_poll_at > timezone.now() + timedelta(seconds=30)
    hostile.set(task.remote_task_id, "TASK_STATE_COMPLETED", artifacts=DONE)
    AgentListing.objects.filter(pk="agent-one").update(next_at=timezone.now())
    assert agent_listing.list_due() == 1
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED  # a listing followed it


def test_an_agent_with_nothing_in_flight_keeps_its_cursor_resting(
    agent: Any, hostile: HostileAgent
) -> None:
    AgentProfile.objects.filter(pk="agent-one").update(listing=False, no_listing_reason="x")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.raw_key}")
    fields = {"agentId": "agent-one", "skillIds": ["ce-review"], "a2aEndpoint": hostile.url}
    answer = client.post("/api/agent-profiles/register", fields, format="json")
    assert answer.status_code == 200, answer.content
    assert profile().listing
    assert not AgentListing.objects.filter(pk="agent-one", next_at__isnull=False).exists()
