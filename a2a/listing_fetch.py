"""Reading one agent's listing: the ``ListTasks`` pages since its cursor
(:mod:`a2a.agent_listing`, on the poll engine's threads), within a time budget.

What a hostile or broken agent could make of it is bounded here: at most ``MAX_PAGES``
pages of ``PAGE_SIZE`` tasks (a page with more is not A2A), no page started past the
listing's budget (its own, from when its fetch starts, capped so that a page started
last still ends within its row's lease from the claim), a ``nextPageToken`` given twice
is not A2A, and a page that brings no task not already read ends the listing
(``endless``: the cursor stays). A listing cut by its pages or its budget (``cut``) is no
fault of the agent's: an honest agent with a burst of changes, or slow pages. The cursor
may move only to a status time the agent has reached (``AHEAD``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import agent_push_body, transports
from a2a.claims import lease_seconds
from a2a.exceptions import A2ACallError, A2AProtocolError
from a2a.listing_models import AgentListing
from a2a.transports.base import AgentTransport, TaskPage
from a2a.transports.redaction import describe_failure
from agent_profiles.deadlines import whole_answer_seconds
from agent_profiles.interfaces import CallTarget

log = logging.getLogger("a2a.agent_listing")

PAGE_SIZE = 100  # the most ListTasks allows
# Pages read per listing. Past them (a burst of changes) the listing is cut: the agent's
# tasks are polled now, for what was not read (a2a.agent_listing).
MAX_PAGES = 50
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A status time later than the platform's clock by more than this, of a task that is not
# one of the platform's own in flight, does not move the cursor: an agent cannot have
# reached it when it answered (the clocks of the two machines agree within this, or the
# cursor follows the platform's own tasks alone). Less than the overlap (5 s at least),
# so the cursor stays behind the agent's clock.
AHEAD = timedelta(seconds=2)
clock = time.monotonic  # the listings' budgets (tests replace it)
# The shortest budget, and the time left after the last page's call to write what the
# listing found while the row is still its own (seconds).
MARGIN = 1.0


def call_seconds() -> float:
    """How long one page's call may take in all: its timeouts, and the rest of an answer
    that started (:func:`~agent_profiles.deadlines.whole_answer_seconds`), not just the
    timeouts."""
    return whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)


def lease() -> float:
    """Seconds a listing's row is claimed for: a task's lease, or longer if that does not
    hold the shortest budget and one whole call (``A2A_LEASE_SECONDS`` set low: a task's
    lease covers its call's timeouts, not the slack of its answer's body)."""
    return max(lease_seconds(), MARGIN + call_seconds() + MARGIN)


def budget() -> float:
    """Seconds a listing may spend starting pages: a second under its row's lease, less
    one whole call (the last page started may take that long), so the listing's outcome
    is written while it still holds the row. At least :data:`MARGIN` (:func:`lease`)."""
    return lease() - call_seconds() - MARGIN


def deadline() -> float:
    """When the listings claimed now must start their last page (:data:`clock`)."""
    return clock() + budget()


@dataclass
class Listing:
    """One agent's listing: what was read (:func:`fetch`), then applied."""

    row: AgentListing
    target: CallTarget
    # clock(): no page starts after it. The sweep sets the cap its claim allows
    # (deadline(), read when the row was claimed); fetch() brings in its own budget.
    deadline: float = float("inf")
    since: datetime | None = None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    newest: datetime | None = None  # the newest status time the cursor may move to
    own_newest: datetime | None = None  # ... of the platform's own tasks (set by _apply)
    endless: bool = False  # a page brought nothing new: it would not end (the agent's fault)
    cut: bool = False  # its pages (MAX_PAGES) or its budget ran out first: not its fault
    started: bool = True  # False: its budget was spent before it could ask anything
    error: A2ACallError | None = None


def stamp(task: dict[str, Any]) -> datetime | None:
    """A listed task's status time, or None: none, or one no cursor can be placed at
    (before 1970: the cursor reaches back from it)."""
    when = agent_push_body.status_time(task.get("status"))
    return when if when is not None and when >= EPOCH else None


def back(when: datetime, seconds: float) -> datetime:
    """``when`` (a :func:`stamp`, so not before 1970) less ``seconds``, not before 1970:
    a year-1 status time less the overlap is no date at all (OverflowError)."""
    return max(EPOCH, when - timedelta(seconds=seconds))


def _page(
    transport: AgentTransport, listing: Listing, since: datetime, size: int, token: str = ""
) -> TaskPage | None:
    """One page, or None if the listing's budget is spent; more tasks than asked is not
    A2A (and would hold megabytes: 50 pages of 10,000 tasks are 500,000)."""
    if clock() >= listing.deadline:
        return None
    page = transport.list_tasks(since=_iso(since), page_size=size, page_token=token)
    if len(page.tasks) > size:
        raise A2AProtocolError(
            f"Agent '{listing.target.agent_id}' answered ListTasks with {len(page.tasks)} "
            f"tasks in a page of {size}."
        )
    return page


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def fetch(listing: Listing) -> Listing:
    """Read the pages of what changed since the cursor (probing a resting one first),
    within the listing's budget: its own from now (time spent waiting for a pool thread,
    behind other agents' listings, is the sweep's, not the agent's), capped by the one its
    claim allows (:attr:`Listing.deadline`), so it still ends within the row's lease."""
    try:
        listing.deadline = min(listing.deadline, clock() + budget())
        transport = transports.transport_for(listing.target)
        since = listing.row.since
        if since is None:
            probe = _page(transport, listing, EPOCH, 1)
            if probe is None:
                listing.started = False
                return listing
            newest = max(filter(None, map(stamp, probe.tasks)), default=None)
            if newest is not None and newest > timezone.now() + AHEAD:
                newest = None  # not a time the agent has reached: list from the start
            since = back(newest, listing.row.overlap) if newest else EPOCH
        listing.since = since
        token, tokens, ids = "", set[str](), set[str]()
        for _ in range(MAX_PAGES):
            page = _page(transport, listing, since, PAGE_SIZE, token)
            if page is None:
                listing.started = bool(tokens) or listing.row.since is None
                listing.cut = True
                _stopped(listing, "its budget ran out")
                break
            listing.tasks += page.tasks
            tokens.add(token)
            token = page.next_page_token
            if not token:
                break
            if token in tokens:  # the same page again, and again: it would never end
                raise A2AProtocolError(
                    f"Agent '{listing.target.agent_id}' answered ListTasks with a "
                    "nextPageToken it had given already."
                )
            listed = {remote["id"] for remote in page.tasks}
            if not listed - ids:  # nothing new: what follows cannot be trusted to end
                listing.endless = True
                _stopped(listing, "a page brought no task it had not listed")
                break
            ids |= listed
        else:
            listing.cut = True
            _stopped(listing, f"{MAX_PAGES} pages")
        # Only a time the agent has reached moves the cursor (AHEAD): the platform's own
        # tasks listed count too (_apply), whatever the two clocks say.
        reached = timezone.now() + AHEAD
        stamps = (when for when in map(stamp, listing.tasks) if when and when <= reached)
        listing.newest = max(stamps, default=None)
    except A2ACallError as exc:
        listing.error = exc
    except Exception as exc:  # a bug must not sink the other agents' listings
        log.exception(
            "agent %s: listing failed",
            listing.target.agent_id,
            extra={"agent_id": listing.target.agent_id},
        )
        # Not its repr: an encoding error's quotes the header it failed on (a credential).
        said = describe_failure(exc, listing.target)
        listing.error = A2ACallError(f"internal error while listing: {said}")
    return listing


def _stopped(listing: Listing, why: str) -> None:
    """The listing stopped before its end (:attr:`Listing.endless` or ``cut`` set)."""
    if not listing.started:
        return
    log.warning(
        "agent %s: listing stopped (%s)",
        listing.target.agent_id,
        why,
        extra={"agent_id": listing.target.agent_id},
    )
