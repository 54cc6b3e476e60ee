"""Celery tasks of the registry: the periodic agent check (beat, AGENT_HEALTH_INTERVAL)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from agent_profiles import health
from agent_profiles.cards import record_failure, refresh_card
from agent_profiles.models import AgentProfile, AgentStatus

logger = logging.getLogger(__name__)

# Cards re-read per run: each may take AGENT_CARD_TIMEOUT; the rest wait for the next run.
CARD_BATCH = 20


def cards_due() -> list[AgentProfile]:
    """Agents whose card was never read (and may be tried now) or is older than
    AGENT_CARD_REFRESH_INTERVAL, oldest first."""
    now = timezone.now()
    never = Q(card_read_at__isnull=True) & (
        Q(card_retry_after__isnull=True) | Q(card_retry_after__lte=now)
    )
    due = never
    if settings.AGENT_CARD_REFRESH_INTERVAL > 0:
        stale = now - timedelta(seconds=settings.AGENT_CARD_REFRESH_INTERVAL)
        due |= Q(card_read_at__lt=stale)
    return list(
        AgentProfile.objects.exclude(status=AgentStatus.DISABLED)
        .exclude(a2a_endpoint="", agent_card_url="")
        .filter(due)
        .order_by("card_read_at", "id")[:CARD_BATCH]
    )


def _record_crash(agent: AgentProfile, exc: Exception) -> None:
    logger.exception("Agent %s: refreshing the card failed", agent.pk, extra={"agent_id": agent.pk})
    try:
        record_failure(agent, f"card refresh failed: {type(exc).__name__}: {exc}", retry=True)
    except Exception:  # the database refuses even that: the log has it
        logger.exception(
            "Agent %s: could not record the card error", agent.pk, extra={"agent_id": agent.pk}
        )


@shared_task(
    name="agent_profiles.check_agents", soft_time_limit=100, time_limit=120, ignore_result=True
)
def check_agents() -> dict[str, int]:
    """Re-read due cards, then check every agent's health.

    Idempotent: both only overwrite what they observed, so a run twice (or two at once)
    is harmless.
    """
    refreshed = 0
    for agent in cards_due():
        try:
            if refresh_card(agent, strict=False) is not None:
                refreshed += 1
        except Exception as exc:
            # One agent's card must not stop every other agent's refresh and health
            # check: logged, recorded on that agent (retried later), and on to the next.
            _record_crash(agent, exc)
    checked = health.check_agents() if settings.AGENT_HEALTH_INTERVAL > 0 else {}
    return {
        "cards_refreshed": refreshed,
        "checked": len(checked),
        "unhealthy": sum(1 for s in checked.values() if s == "unhealthy"),
    }
