"""Each agent's listing cursor (:mod:`a2a.agent_listing`).

Imported by :mod:`a2a.models` so Django registers it in the ``a2a`` app.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, models, transaction
from django.db.models import Case, DateTimeField, F, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from agent_profiles.models import AgentProfile

# A process that recorded a follow for an agent this recently does not write it again:
# under load every send would otherwise update the one row.
FOLLOW_MEMO = 1.0
# A cursor rests only if no follow was recorded this long before its listing began, so a
# task sent meanwhile (recorded, or skipped by the memo) is never left unlisted.
REST_MARGIN = timedelta(seconds=5)

# When this process last recorded a follow, per agent. A memo older than FOLLOW_MEMO is as
# good as none, and such memos are dropped at most once per FOLLOW_MEMO, so the dict holds
# the agents followed in the last second or two, not every agent ever followed.
_followed: dict[str, float] = {}
_followed_lock = threading.Lock()
_pruned_at = 0.0
_clock = time.monotonic  # tests replace it


def forget() -> None:
    """Forget the follows this process recorded (tests: their rows are gone)."""
    global _pruned_at
    with _followed_lock:
        _followed.clear()
        _pruned_at = 0.0


def _remember(agent_id: str, clock: float) -> None:
    """Note a follow recorded at ``clock``; drop the memos that no longer matter."""
    global _pruned_at
    with _followed_lock:
        _followed[agent_id] = clock
        if clock - _pruned_at < FOLLOW_MEMO:
            return
        _pruned_at = clock
        for key in [key for key, at in _followed.items() if clock - at >= FOLLOW_MEMO]:
            del _followed[key]


class AgentListing(models.Model):
    """Where the platform is in listing one agent's tasks (``ListTasks``).

    While the agent has polled tasks in flight the sweep asks it, once per
    ``A2A_LIST_INTERVAL``, for the tasks whose status changed at or after ``since`` (the
    agent's clock), instead of asking for each task. ``next_at`` None: nothing to follow
    (the cursor rests). ``lease_until`` keeps two workers from listing one agent at once.
    Fields change only through the verbs below.
    """

    agent = models.OneToOneField(
        AgentProfile, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    since = models.DateTimeField(null=True, blank=True)  # None: to be probed
    next_at = models.DateTimeField(null=True, blank=True, db_index=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    followed_at = models.DateTimeField(default=timezone.now)
    listed_at = models.DateTimeField(null=True, blank=True)
    # Seconds each listing reaches back before the newest status time it saw. It widens
    # when a task's own poll finds a change the listings passed: an agent that makes a
    # change visible (stores it) seconds after the time it gives it, as a loaded a2a-sdk
    # agent does.
    overlap = models.FloatField(default=5.0, db_default=5.0)
    # Changes the listings missed even at the widest overlap (a2a.agent_listing).
    misses = models.PositiveIntegerField(default=0)
    # Listings in a row that failed (a transient error) / could not end for the agent's
    # fault (a page bringing nothing new): an agent whose listing never gets through is
    # not left to it.
    failures = models.PositiveIntegerField(default=0, db_default=0)
    truncations = models.PositiveIntegerField(default=0, db_default=0)

    def __str__(self) -> str:
        return f"listing {self.agent_id} since {self.since}"

    @classmethod
    def follow(cls, agent_id: str) -> None:
        """A task of this agent is followed by listing: keep listing (start if resting)."""
        clock = _clock()
        if clock - _followed.get(agent_id, -FOLLOW_MEMO) < FOLLOW_MEMO:
            return
        now = timezone.now()
        fields: dict[str, Any] = {"followed_at": now, "next_at": Coalesce("next_at", now)}
        if not cls.objects.filter(pk=agent_id).update(**fields):
            try:
                with transaction.atomic():
                    cls.objects.create(agent_id=agent_id, followed_at=now, next_at=now)
            except IntegrityError:  # another process created it meanwhile
                cls.objects.filter(pk=agent_id).update(**fields)
        _remember(agent_id, clock)

    @classmethod
    def cover(cls, agent_id: str, since: datetime) -> None:
        """A task the agent took at or after ``since`` (its clock) had its send's answer
        recorded only now: the next listing starts no later than that, so a change the
        agent made before the platform knew the task's id is listed again."""
        ahead = Q(since__gt=since) | Q(since__isnull=True)
        cls.objects.filter(ahead, pk=agent_id).update(since=since)

    @classmethod
    def claim_due(
        cls, now: datetime, lease: datetime, left_out: list[str] | None = None
    ) -> list[AgentListing]:
        """The cursors due now that no other worker holds, each claimed until ``lease``;
        not those of the agents ``left_out`` (paused: they stay due)."""
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        claimed = []
        due = cls.objects.filter(free, next_at__lte=now).exclude(pk__in=left_out or [])
        for row in due.select_related("agent"):
            seen = {"pk": row.pk, "next_at": row.next_at, "lease_until": row.lease_until}
            if cls.objects.filter(**seen).update(lease_until=lease):
                row.lease_until = lease
                claimed.append(row)
        return claimed

    def _mine(self) -> Any:
        return type(self).objects.filter(pk=self.pk, lease_until=self.lease_until)

    def listed(
        self, since: datetime | None, next_at: datetime, *, endless: bool = False, cut: bool = False
    ) -> bool:
        """A listing went through: changes before ``since`` are known; list again then.
        ``endless``: it could not end, the agent's fault (counted; ``since`` is where it
        began). ``cut``: its pages or its budget ran out, no fault of the agent's (neither
        counted nor a count started again: it did not end either).

        Unless a send's answer moved the cursor back meanwhile (:meth:`cover`): that point
        is kept, or the change it covers would be passed again. False if this sweep no
        longer holds the row's lease (another lists the agent now): nothing is written."""
        started = self.since
        lowered = Q(since__lt=started) if started is not None else Q(since__isnull=False)
        kept = Case(When(lowered, then=F("since")), default=Value(since, DateTimeField()))
        now = timezone.now()
        truncations: Any = Value(0)
        if endless:
            truncations = F("truncations") + 1
        elif cut:
            truncations = F("truncations")
        fields = {"since": kept, "next_at": next_at, "lease_until": None, "listed_at": now}
        return bool(self._mine().update(**fields, failures=0, truncations=truncations))

    def put_off(self, next_at: datetime, *, failed: bool = True) -> bool:
        """The listing failed for now (counted, unless not ``failed``: it could not
        start): try again at ``next_at``, from the same point. A failure breaks a run of
        endless listings: they are counted in a row. False if this sweep no longer holds
        the row's lease: nothing is written."""
        if not failed:
            return bool(self._mine().update(next_at=next_at, lease_until=None))
        fields = {"failures": F("failures") + 1, "truncations": 0}
        return bool(self._mine().update(next_at=next_at, lease_until=None, **fields))

    def rest(self, began: datetime) -> bool:
        """Nothing to follow at this agent: stop listing, unless a task was sent to be
        followed since ``began`` (the next follow starts it again, probing anew)."""
        rows = self._mine().filter(followed_at__lt=began - REST_MARGIN)
        fields = {"next_at": None, "since": None, "lease_until": None}
        return bool(rows.update(**fields, failures=0, truncations=0))

    @classmethod
    def missed(cls, agent_id: str, stamp: datetime, widest: float) -> int | None:
        """A task's own poll found a change of ``stamp`` (the agent's clock) that the
        listings had passed without showing it. The cursor goes back before it (the
        agent's other changes of that time are listed again) and the overlap widens, up to
        ``widest`` seconds; past that, the miss counts. Returns the misses counted so far,
        or None if the listings had not passed that time (no miss)."""
        row = cls.objects.filter(pk=agent_id, since__gt=stamp).first()
        if row is None or row.since is None:
            return None
        late = (row.since - stamp).total_seconds()
        back = stamp - timedelta(seconds=1)
        if row.overlap < widest:
            wider = min(widest, max(row.overlap * 2, row.overlap + late))
            cls.objects.filter(pk=agent_id, since__gt=back).update(since=back, overlap=wider)
            return 0
        cls.objects.filter(pk=agent_id, since__gt=back).update(since=back)
        cls.objects.filter(pk=agent_id).update(misses=F("misses") + 1)
        return int(cls.objects.filter(pk=agent_id).values_list("misses", flat=True).first() or 0)

    def stop_held(self) -> bool:
        """:meth:`stop`, only while this sweep still holds the row's lease: a sweep whose
        lease ran out (another lists the agent now) gives no verdict on it."""
        fields = {"next_at": None, "since": None, "lease_until": None}
        if not self._mine().update(**fields, failures=0, truncations=0):
            return False
        with _followed_lock:
            _followed.pop(self.pk, None)
        return True

    @classmethod
    def stop(cls, agent_id: str) -> None:
        """The agent cannot be followed by listing: its cursor rests for good."""
        rows = cls.objects.filter(pk=agent_id)
        rows.update(next_at=None, since=None, lease_until=None, failures=0, truncations=0)
        with _followed_lock:
            _followed.pop(agent_id, None)
