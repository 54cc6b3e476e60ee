"""Agents whose ``ListTasks`` is hostile or broken: a listing that hangs, pages that never
end or hold more than asked, timestamps that cannot be used, a listing that keeps failing,
a task listed twice. Each costs a bounded number of requests, never blocks the other
agents' listings, and loses nothing (its tasks are still polled, or listed).
"""

# The hostile agent's fixtures come from hostile_setup: the tests' parameters name them.
# ruff: noqa: F811

from __future__ import annotations

import json
import threading
from datetime import timedelta
from itertools import count
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_listing, agent_push_body, listing_fetch
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import TaskState
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


# --- 1. a slow listing: the other agents' are applied as they come; a budget ---------------


def test_a_hanging_listing_does_not_hold_back_another_agents(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any
) -> None:
    settings.A2A_HTTP_TIMEOUT = 5.0
    released = threading.Event()
    applied: list[str] = []
    apply = agent_listing._apply

    def spy(listing: Any) -> int:
        applied.append(listing.target.agent_id)
        if listing.target.agent_id == "agent-b":
            released.set()  # the hanging agent answers once the other one was applied
        return apply(listing)

    monkeypatch.setattr(agent_listing, "_apply", spy)
    skill = make_skill(id="ce-review")
    user = make_user()
    with hostile_agent() as slow, hostile_agent() as fast:
        # agent-a first: the old sweep applied the listings in this order, b after a's.
        for agent_id, agent in (("agent-a", slow), ("agent-b", fast)):
            make_agent(
                id=agent_id, skills=[skill], a2a_endpoint=agent.url, card_read_at=timezone.now()
            )
        sent(user, "agent-a")
        task = sent(user, "agent-b")
        fast.set(task.remote_task_id, "TASK_STATE_COMPLETED", artifacts=DONE)
        answered: list[bool] = []

        def hang(query: dict[str, list[str]]) -> Any:
            answered.append(released.wait(4.0))
            return slow.page([])

        slow.list_handler = hang
        AgentListing.objects.update(next_at=timezone.now())
        assert agent_listing.list_due() == 2
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert applied == ["agent-b", "agent-a"]
    assert answered == [True]  # agent-b's end was applied while agent-a's listing hung


def test_a_listing_stops_paging_when_its_budget_is_spent(
    user: Any, hostile: HostileAgent, monkeypatch: Any
) -> None:
    # Each page takes a third of the budget (a fake clock: no test waits for it). Without
    # a budget the listing read its 50 pages, past its row's lease.
    now = [0.0]
    monkeypatch.setattr(listing_fetch, "clock", lambda: now[0])
    task = sent(user)
    pages = count()

    def slow(query: dict[str, list[str]]) -> Any:
        now[0] += listing_fetch.budget() / 3 + 0.01
        page = next(pages)
        return hostile.page([{**task_view(hostile, task), "id": f"other-{page}"}], f"t{page}")

    hostile.list_handler = slow
    placed = cursor().since
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now() + timedelta(minutes=1))
    listed_now()
    assert hostile.listings() == 3
    row = cursor()
    # Not the agent's fault (not counted); what it did not read is left to the task's poll,
    # due now. The tasks read bear the task's own time: the cursor is already there.
    assert (row.since, row.truncations, row.lease_until) == (placed, 0, None)
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()


def task_view(agent: HostileAgent, task: Task) -> dict[str, Any]:
    return agent.tasks[task.remote_task_id]


# --- 2. pages that never end ---------------------------------------------------------------


def test_a_repeated_page_token_is_not_a2a(user: Any, hostile: HostileAgent) -> None:
    task = sent(user)
    hostile.list_handler = lambda query: hostile.page(list(hostile.tasks.values()), "again")
    listed_now()
    assert hostile.listings() == 2  # not 50, every interval
    assert not profile().listing
    assert "nextPageToken" in profile().no_listing_reason
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()  # polled at once, from now on


def test_pages_that_bring_nothing_new_end_the_listing_then_listing(
    user: Any, hostile: HostileAgent
) -> None:
    task = sent(user)
    tokens = count()
    hostile.list_handler = lambda query: hostile.page(
        list(hostile.tasks.values()), f"t{next(tokens)}"
    )
    for listed in range(1, agent_listing.TRUNCATIONS):
        listed_now()
        assert hostile.listings() == 2 * listed  # the second page brought nothing new
        assert (profile().listing, cursor().truncations) == (True, listed)
    listed_now()
    assert not profile().listing
    assert agent_listing.ENDLESS in profile().no_listing_reason
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()


def test_a_listing_that_ends_starts_the_count_again(user: Any, hostile: HostileAgent) -> None:
    sent(user)
    tokens = count()
    hostile.list_handler = lambda query: hostile.page(
        list(hostile.tasks.values()), f"t{next(tokens)}"
    )
    listed_now()
    assert cursor().truncations == 1
    hostile.list_handler = None  # one page, to its end
    listed_now()
    assert (cursor().truncations, profile().listing) == (0, True)


# --- 3. pages larger than asked ------------------------------------------------------------


def test_a_page_with_more_tasks_than_asked_is_not_a2a(user: Any, hostile: HostileAgent) -> None:
    sent(user)
    many = [
        {
            "id": f"other-{n}",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:00Z"},
        }
        for n in range(listing_fetch.PAGE_SIZE + 1)
    ]
    hostile.list_handler = lambda query: hostile.page(many, "more")
    listed_now()
    assert hostile.listings() == 1
    assert not profile().listing
    assert "101 tasks in a page of 100" in profile().no_listing_reason


# --- 4, 5. timestamps that cannot be used --------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:01+05:00", "0001-01-01T00:00:03Z"]
)
def test_a_stamp_with_no_place_in_utc_is_no_stamp(
    raw: str, user: Any, hostile: HostileAgent, caplog: Any
) -> None:
    task = sent(user)
    hostile.tasks["other"] = {
        "id": "other",
        "status": {"state": "TASK_STATE_WORKING", "timestamp": raw},
    }
    listed_now()  # went through: no error, its lease given back
    assert cursor().lease_until is None
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
    hostile.set(task.remote_task_id, "TASK_STATE_COMPLETED", artifacts=DONE)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


def test_status_time_is_none_past_what_utc_can_tell() -> None:
    assert agent_push_body.status_time({"timestamp": "9999-12-31T23:59:59-05:00"}) is None
    assert agent_push_body.status_time({"timestamp": "0001-01-01T00:00:01+05:00"}) is None
    stamp = agent_push_body.status_time({"timestamp": "2026-01-01T05:00:00+05:00"})
    assert stamp is not None
    assert stamp.isoformat() == "2026-01-01T00:00:00+00:00"


def test_a_far_future_stamp_of_a_task_never_sent_leaves_the_cursor(
    user: Any, hostile: HostileAgent
) -> None:
    task = sent(user)
    future = {"state": "TASK_STATE_WORKING", "timestamp": "2999-01-01T00:00:00Z"}
    hostile.tasks["other"] = {"id": "other", "status": future}

    def honest(query: dict[str, list[str]]) -> Any:  # statusTimestampAfter applied
        after = agent_push_body.status_time({"timestamp": query["statusTimestampAfter"][0]})
        tasks = list(hostile.tasks.values())
        return hostile.page([t for t in tasks if agent_push_body.status_time(t["status"]) >= after])

    hostile.list_handler = honest
    listed_now()
    assert cursor().since < timezone.now()  # not 2999, past every real change
    hostile.set(task.remote_task_id, "TASK_STATE_COMPLETED", artifacts=DONE)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


def test_the_platforms_own_tasks_move_the_cursor_whatever_the_clocks(
    user: Any, hostile: HostileAgent
) -> None:
    # An agent whose clock is an hour ahead: its stamps are all past the platform's clock,
    # but those of the platform's own tasks are times it has reached.
    task = sent(user)
    ahead = timezone.now() + timedelta(hours=1)
    hostile.set(task.remote_task_id, "TASK_STATE_WORKING", ahead.isoformat())
    listed_now()
    assert cursor().since == ahead - timedelta(seconds=cursor().overlap)


# --- 6. a listing that keeps failing -------------------------------------------------------


@pytest.mark.parametrize("code", [500, 401, 503])
def test_a_listing_that_keeps_failing_has_its_tasks_polled(
    code: int, user: Any, hostile: HostileAgent
) -> None:
    task = sent(user)
    error = json.dumps({"error": {"code": code, "message": "broken"}}).encode()
    hostile.list_handler = lambda query: (code, {"Retry-After": "1"}, error)
    for failed in range(1, agent_listing.FAILURES):
        listed_now()
        task.refresh_from_db()
        assert cursor().failures == failed
        assert task.next_poll_at > timezone.now() + timedelta(seconds=30)  # the safety net's
        paused_a_second_ago()  # the agent's Retry-After (a 5xx's) held the next listing
    listed_now()
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()  # due now: polled at the listing's retries
    assert profile().listing  # not for good: the next listing that goes through counts
    hostile.list_handler = None
    paused_a_second_ago()
    listed_now()
    assert cursor().failures == 0


def paused_a_second_ago() -> None:
    """The pause the agent's ``Retry-After: 1`` asked for is over (a second later)."""
    AgentPause.objects.filter(agent_id="agent-one").update(until=timezone.now())


# --- 8. a task listed twice ----------------------------------------------------------------


def test_a_task_listed_twice_keeps_its_latest_view(user: Any, hostile: HostileAgent) -> None:
    task = sent(user)
    old = dict(task_view(hostile, task))
    later = (timezone.now() + timedelta(seconds=1)).isoformat()
    hostile.set(task.remote_task_id, "TASK_STATE_COMPLETED", later, artifacts=DONE)
    new = task_view(hostile, task)
    hostile.list_handler = lambda query: hostile.page([old, new])  # the older view first
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


@pytest.mark.parametrize(
    "bad", ["bad\\u0000id", "bad\\ud800id", "r" * 300], ids=["nul", "surrogate", "long"]
)
def test_a_listed_id_the_platform_cannot_hold_is_passed_over(
    bad: str, user: Any, hostile: HostileAgent
) -> None:
    # PostgreSQL refused the NUL and the surrogate in the listing's query (SQLite the
    # surrogate): every listing of the agent failed, and its tasks waited on the safety net.
    task = sent(user)
    hostile.set(task.remote_task_id, "TASK_STATE_COMPLETED", artifacts=DONE)
    good = json.dumps(task_view(hostile, task))
    foreign = json.dumps({**task_view(hostile, task), "id": "XX"}).replace('"XX"', f'"{bad}"')
    body = f'{{"tasks": [{foreign}, {good}]}}'.encode()
    hostile.list_handler = lambda query: (200, {}, body)
    listed_now()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert profile().listing


# --- 7. a "no listing" mark is not for good ------------------------------------------------


@pytest.mark.parametrize("how", ["register", "refresh"])
def test_a_no_listing_mark_is_cleared_when_the_agent_registers_or_its_card_is_read(
    how: str, agent: Any, user: Any, hostile: HostileAgent
) -> None:
    sent(user)
    mark_then_clear(how, agent, hostile)
    assert (profile().listing, profile().no_listing_reason) == (True, "")
    sent(user)  # followed by listing again
