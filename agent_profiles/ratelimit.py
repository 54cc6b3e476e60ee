"""A rate limit every process shares: counts per client and window, in the database.

DRF's throttles count in Django's cache, which is per process here (local memory): with
four daphne processes a client had four times the limit, and more by spreading its
requests. These counts live in :class:`~agent_profiles.models.RateWindow` rows, so every
process of either mode reads and writes the same ones; no cache service is needed.

The limit slides: the count of the window before is weighed by how much of it still lies
within one duration of now (the usual sliding-window estimate), so a client cannot spend
the limit at the end of one window and again at the start of the next. A refused request
counts nothing (as with DRF's own throttles): a client that waits is let in again.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection, transaction

from agent_profiles.models import RateWindow


@dataclass(frozen=True)
class Verdict:
    """Whether the request may go on, and when not, the seconds until one may."""

    allowed: bool
    retry_after: float = 0.0


def client_key(client: str) -> str:
    """What a row stores of a client's address: its SHA-256, so whatever a header
    carried is kept in a fixed size (and the admin finds an address by hashing it)."""
    return hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()


def _count_one(scope: str, client: str, slot: int, seconds: float) -> int:
    """Add one request to the window and return its count (one statement, an upsert)."""
    table = connection.ops.quote_name(RateWindow._meta.db_table)
    started = RateWindow._meta.get_field("started_at")
    began = datetime.fromtimestamp(slot * seconds, tz=UTC)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (scope, client, slot, started_at, hits) "
            "VALUES (%s, %s, %s, %s, 1) "
            f"ON CONFLICT (scope, client, slot) DO UPDATE SET hits = {table}.hits + 1 "
            "RETURNING hits",
            [scope, client, slot, started.get_db_prep_save(began, connection)],
        )
        return int(cursor.fetchone()[0])


def hit(scope: str, client: str, limit: int, seconds: float, now: float | None = None) -> Verdict:
    """Count one request of ``client`` against ``limit`` per ``seconds`` in ``scope``.

    One transaction: the count is added, and taken back (rolled back) when the request
    is refused. The first request of a window in each process drops the scope's windows
    that no longer count, so the table holds about two rows per recent client.
    """
    now = time.time() if now is None else now
    slot = int(now // seconds)
    into = (now - slot * seconds) / seconds  # how far into its window, 0..1
    key = client_key(client)
    with transaction.atomic():
        hits = _count_one(scope, key, slot, seconds)
        before = (
            RateWindow.objects.filter(scope=scope, client=key, slot=slot - 1)
            .values_list("hits", flat=True)
            .first()
        ) or 0
        if before * (1 - into) + hits > limit:
            transaction.set_rollback(True)
            return Verdict(False, _retry_after(before, hits - 1, limit, seconds, into))
        _forget_old_windows(scope, slot)
    return Verdict(True)


# The window each scope's old rows were last dropped in, by this process.
_dropped: dict[str, int] = {}


def _forget_old_windows(scope: str, slot: int) -> None:
    """Drop the scope's windows that no longer count, once per window per process (not
    per client: a flood of new addresses must not make every request scan the table)."""
    if _dropped.get(scope) == slot:
        return
    RateWindow.objects.filter(scope=scope, slot__lt=slot - 1).delete()
    _dropped[scope] = slot


def _retry_after(before: int, current: int, limit: int, seconds: float, into: float) -> float:
    """Seconds until the estimate leaves room for one more request (``current``: this
    window's count without the refused request)."""
    if current < limit and before > 0:
        # Within this window: the earlier window's weight falls by 1/seconds per second.
        wait = (before * (1 - into) + current + 1 - limit) * seconds / before
        if wait <= (1 - into) * seconds:
            return _whole_seconds(wait)
    # Into the next window, where this window's count is the one that fades.
    rest = (1 - into) * seconds
    fade = (current + 1 - limit) * seconds / current if current else 0.0
    return _whole_seconds(rest + max(0.0, fade))


def _whole_seconds(wait: float) -> float:
    # Up to whole seconds (Retry-After), past float noise: 14.000000001 is 14.
    return float(max(1, math.ceil(round(wait, 6))))
