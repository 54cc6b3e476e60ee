"""The listing cursor, in the agent's clock: where each listing leaves it, and where a send's
answer moves it (back before the agent took the send, never for a task the answer ended).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import listing_fetch
from a2a.listing_models import AgentListing
from a2a.states import TaskState
from tests.a2a.listing.support import listed_now, start

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_listing_cut_short_moves_on_uncounted(setup: Any, monkeypatch: Any) -> None:
    for _ in range(3):
        start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    listed_now()  # a first listing places the cursor
    monkeypatch.setattr(listing_fetch, "PAGE_SIZE", 1)
    monkeypatch.setattr(listing_fetch, "MAX_PAGES", 2)
    start(setup, "slow", seconds=0.1)
    time.sleep(0.3)
    # No overlap, so a listing read to its end would move the cursor to the newest status
    # time it saw (this last task's end). Read just before the listing: the send's answer
    # may have moved it back (its Date can lag a second behind the agent's clock).
    AgentListing.objects.filter(pk="agent-one").update(overlap=0.0)
    placed = AgentListing.objects.get(pk="agent-one").since
    assert placed is not None
    listed_now()  # more changes than two pages of one: cut short
    # Not counted against the agent, and the cursor moves on to the newest status time
    # read (pages newest first): what the cut left unread is its tasks' polls' to find.
    row = AgentListing.objects.get(pk="agent-one")
    assert row.since > placed
    assert row.truncations == 0


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
