"""Reading one agent's listing: the ``ListTasks`` pages since its cursor
(:mod:`a2a.agent_listing`, on the poll engine's threads), within a time budget.

What a hostile or broken agent could make of it is bounded here: at most ``MAX_PAGES``
pages of ``PAGE_SIZE`` tasks (a page with more is not A2A), no page started past the
listing's budget (a little under its row's lease), a ``nextPageToken`` given twice is
not A2A, and a page that brings no task not already read ends the listing (truncated:
the cursor stays). The cursor may move only to a status time the agent has reached
(``AHEAD``).
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
from agent_profiles.interfaces import CallTarget

log = logging.getLogger("a2a.agent_listing")

PAGE_SIZE = 100  # the most ListTasks allows
# Pages read per listing. Past them (a burst of changes, an agent ignoring the filter) the
# cursor stays where it was, so nothing is skipped; what was not read waits for the next
# listings or the safety polls.
MAX_PAGES = 50
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A status time later than the platform's clock by more than this, of a task that is not
# one of the platform's own in flight, does not move the cursor: an agent cannot have
# reached it when it answered (the clocks of the two machines agree within this, or the
# cursor follows the platform's own tasks alone). Less than the overlap (5 s at least),
# so the cursor stays behind the agent's clock.
AHEAD = timedelta(seconds=2)
clock = time.monotonic  # the listings' budgets (tests replace it)


def budget() -> float:
    """Seconds a listing may spend starting pages: a little under its row's lease, less
    one call (the last page started may take that long). At least one second (the lease
    is at least a call plus two)."""
    call = settings.A2A_HTTP_TIMEOUT + settings.A2A_CONNECT_TIMEOUT
    return max(1.0, lease_seconds() - call - 1.0)


def deadline() -> float:
    """When the listings claimed now must start their last page (:data:`clock`)."""
    return clock() + budget()


@dataclass
class Listing:
    """One agent's listing: what was read (:func:`fetch`), then applied."""

    row: AgentListing
    target: CallTarget
    deadline: float = float("inf")  # clock(): no page starts after it
    since: datetime | None = None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    newest: datetime | None = None  # the newest status time the cursor may move to
    own_newest: datetime | None = None  # ... of the platform's own tasks (set by _apply)
    truncated: bool = False
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
    within the listing's budget."""
    try:
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
                _truncated(listing, "its budget ran out")
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
                _truncated(listing, "a page brought no task it had not listed")
                break
            ids |= listed
        else:
            _truncated(listing, f"{MAX_PAGES} pages")
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


def _truncated(listing: Listing, why: str) -> None:
    """The listing stopped before its end: its cursor stays (nothing read is skipped)."""
    listing.truncated = True
    if not listing.started:
        return
    log.warning(
        "agent %s: listing stopped (%s); its cursor stays",
        listing.target.agent_id,
        why,
        extra={"agent_id": listing.target.agent_id},
    )
