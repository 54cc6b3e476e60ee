"""Fetching agents' cards and storing what they say (the interface to call, capabilities,
security schemes).

The card is looked for at ``agentCardUrl`` when registered, else at
``{a2aEndpoint}/.well-known/agent-card.json`` and then (if that answers 404)
``{origin of a2aEndpoint}/.well-known/agent-card.json``. Every request goes through the
URL guard, follows no redirect (a redirect is an error naming its target), has a timeout
and reads at most ``AGENT_CARD_MAX_BYTES``.

Three outcomes: read (stored), *unreachable* (no card was read: connection error,
timeout, 5xx, or 404 at every location, i.e. no card served; not an error at
registration, recorded in ``card_error``), and *refused* (something was served but it is
not a usable card, or a URL is not allowed: :class:`~platform_site.errors.ValidationFailed`,
a 400 at registration). A compressed card is decoded a bounded step at a time
(:mod:`agent_profiles.bodies`), its limit applying to what it expands to.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_profiles.bodies import BadEncoding, iter_decoded
from agent_profiles.card_reads import reading
from agent_profiles.deadlines import whole_answer_by, whole_answer_seconds
from agent_profiles.guarded_http import guarded_client
from agent_profiles.models import AgentCard, AgentProfile, HealthStatus
from agent_profiles.negotiation import (
    Interface,
    InvalidCard,
    ParsedCard,
    no_supported_interface,
    parse_card,
    spoken,
)
from agent_profiles.urlguard import UnsafeURL, check_url
from platform_site.errors import ValidationFailed
from platform_site.text import JSONTooDeep, find_bad_text, loads_bounded

logger = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/agent-card.json"
# Statuses that mean "no card here": the next location is tried.
NOT_HERE = {404, 410}
CARD_NOT_READ = "agent card not read"


@dataclass(frozen=True)
class CardRead:
    """A card that was read and offers an interface the platform speaks."""

    document: dict[str, Any]
    source_url: str
    parsed: ParsedCard
    chosen: Interface


class CardUnreachable(Exception):
    """No card could be read (yet): the reason, for ``card_error`` and health.

    ``answered``: the agent answered, but serves no card (404 at every location); it is
    reachable then, so its health is not marked unhealthy for it.
    """

    def __init__(self, reason: str, *, answered: bool = False) -> None:
        super().__init__(reason)
        self.answered = answered

    def describe(self) -> str:
        """For ``card_error``."""
        return f"{'no card served' if self.answered else 'unreachable'}: {self}"


def card_locations(card_url: str, endpoint: str) -> list[str]:
    """Where to look for the card, in order."""
    if card_url:
        return [card_url]
    if not endpoint:
        return []
    base = endpoint.rstrip("/")
    parts = urlsplit(endpoint)
    origin = f"{parts.scheme}://{parts.netloc}"
    return list(dict.fromkeys([base + WELL_KNOWN, origin + WELL_KNOWN]))


def _get(client: httpx.Client, url: str, seconds: float) -> tuple[int, str, bytes]:
    """Status, content type and body (at most AGENT_CARD_MAX_BYTES) of ``GET url``; an
    answer not whole by :func:`~agent_profiles.deadlines.whole_answer_seconds` is a read
    timeout (the per-read timeout alone let a card trickled a byte a second hold a
    registration, and the card's lock that new tasks wait on, as long as it went on)."""
    limit = settings.AGENT_CARD_MAX_BYTES
    with (
        whole_answer_by(whole_answer_seconds(seconds, seconds)),
        client.stream("GET", url, headers={"Accept": "application/json"}) as response,
    ):
        if response.is_redirect:
            location = response.headers.get("location", "")
            raise InvalidCard(
                f"The agent card URL {url} redirects ({response.status_code}) to {location!r}; "
                "the platform follows no redirects: register the final URL as agentCardUrl.",
                {"cardUrl": url, "location": location},
                code="agent_card_redirect",
            )
        body = b""
        try:
            # Decoded a bounded step at a time: a gzipped card is checked against the
            # limit as it expands, not after (64 kB of gzip is 64 MB of zeros).
            for chunk in iter_decoded(response):
                body += chunk
                if len(body) > limit:
                    raise InvalidCard(
                        f"The agent card at {url} is larger than {limit} bytes.",
                        {"cardUrl": url, "limit": limit},
                        code="agent_card_too_large",
                    )
        except BadEncoding as exc:
            if not response.is_success:
                raise  # an error page garbled: not read, as any transport error
            raise InvalidCard(
                f"The agent card at {url} is not usable: {exc}.", {"cardUrl": url}
            ) from None
        return response.status_code, response.headers.get("content-type", ""), body


def _decode(url: str, content_type: str, body: bytes) -> Any:
    try:
        document = loads_bounded(body)
    except JSONTooDeep as exc:
        raise InvalidCard(
            f"The agent card at {url} is not usable: {exc}", {"cardUrl": url}
        ) from None
    except ValueError:
        kind = content_type.split(";")[0].strip() or "no content type"
        raise InvalidCard(
            f"The document at {url} is not an agent card: it is not JSON ({kind}).",
            {"cardUrl": url, "contentType": kind},
        ) from None
    bad = find_bad_text(document, "card")
    if bad is not None:
        raise InvalidCard(f"The agent card at {url} is not usable: {bad}", {"cardUrl": url})
    return document


def _check_length(url: str) -> None:
    """The chosen URL becomes the endpoint of an agent registered by its card only: one
    that does not fit the column is refused as registration refuses it (PostgreSQL
    answered a DataError, a 500, and SQLite stored what registration would not)."""
    limit = AgentProfile._meta.get_field("a2a_endpoint").max_length
    if limit is not None and len(url) > limit:
        raise UnsafeURL(
            f"URL {url[:100]!r}... is longer than {limit} characters.",
            {"url": url[:limit], "limit": limit},
        )


def _choose(parsed: ParsedCard, source_url: str) -> Interface:
    candidates = spoken(parsed.interfaces)
    if not candidates:
        raise no_supported_interface(parsed.interfaces, source_url)
    refused: ValidationFailed | None = None
    for candidate in candidates:
        try:
            _check_length(candidate.url)
            check_url(candidate.url)  # dispatch's calls resolve and pin it
        except ValidationFailed as exc:
            refused = refused or exc
            continue
        return candidate
    assert refused is not None
    raise ValidationFailed(
        f"The agent card at {source_url} offers interfaces only at URLs the platform may not "
        f"call: {refused.message}",
        {"cardUrl": source_url},
        code="invalid_url",
    )


def fetch_card(card_url: str, endpoint: str, *, timeout: float | None = None) -> CardRead:
    """Read and check the card; :class:`CardUnreachable` or ``ValidationFailed``."""
    locations = card_locations(card_url, endpoint)
    if not locations:
        raise CardUnreachable("no agentCardUrl and no a2aEndpoint to look for a card at")
    seconds = settings.AGENT_CARD_TIMEOUT if timeout is None else timeout
    misses: list[str] = []
    # The guarded client resolves each name when the request leaves, refuses private
    # targets and connects to the address it checked; it follows no redirects.
    with guarded_client(timeout=httpx.Timeout(seconds)) as client:
        for url in locations:
            try:
                status, content_type, body = _get(client, url, seconds)
            except UnsafeURL as exc:
                if isinstance(exc.details, dict) and "address" in exc.details:
                    raise  # a refused target: 400 at registration
                raise CardUnreachable(exc.message) from None  # DNS cannot answer (yet)
            except httpx.HTTPError as exc:
                raise CardUnreachable(f"{url}: {type(exc).__name__} {exc}".strip()) from None
            except (httpx.InvalidURL, ValueError) as exc:
                # A URL httpx cannot send (a host it cannot encode): the URL is at fault,
                # not the network, so it is refused (400), never a 500.
                raise UnsafeURL(f"URL {url!r} cannot be requested: {exc}.", {"url": url}) from None
            if status in NOT_HERE:
                misses.append(f"{url}: HTTP {status}")
                continue
            if status >= 300:
                raise CardUnreachable(f"{url}: HTTP {status}")
            document = _decode(url, content_type, body)
            parsed = parse_card(document, url)
            return CardRead(document, url, parsed, _choose(parsed, url))
    raise CardUnreachable("; ".join(misses), answered=True)


def apply_card(agent: AgentProfile, read: CardRead) -> list[str]:
    """Set what ``read`` says on ``agent`` (not saved); the changed field names."""
    now = timezone.now()
    agent.interface = read.chosen.as_dict()
    agent.streaming = read.parsed.streaming
    agent.push_notifications = read.parsed.push_notifications
    agent.json_input = read.parsed.json_input
    agent.security_schemes = read.parsed.security_schemes
    agent.security_requirements = read.parsed.security_requirements
    agent.card_read_at = now
    agent.card_error = ""
    agent.card_retry_after = None
    fields = [
        "interface",
        "streaming",
        "push_notifications",
        "json_input",
        "security_schemes",
        "security_requirements",
        "card_read_at",
        "card_error",
        "card_retry_after",
    ]
    if agent.health_error.startswith(CARD_NOT_READ):
        # Health said "unreachable" only because the card was not read: it is now.
        agent.health_status, agent.health_error = HealthStatus.HEALTHY, ""
        agent.health_checked_at = now
        fields += ["health_status", "health_error", "health_checked_at"]
    if not agent.a2a_endpoint:
        # Registered with a card URL only: the card's interface is its endpoint.
        agent.a2a_endpoint = read.chosen.url
        fields.append("a2a_endpoint")
    return fields


def store_document(agent: AgentProfile, read: CardRead) -> None:
    """Keep the card document (the agent must be saved already)."""
    AgentCard.objects.update_or_create(
        agent=agent,
        defaults={
            "document": read.document,
            "source_url": read.source_url,
            "read_at": timezone.now(),
        },
    )


def _save(
    agent: AgentProfile,
    fields: list[str],
    read: CardRead | None,
    guard: Callable[[], None] | None = None,
) -> None:
    with transaction.atomic():
        if guard is not None:
            guard()  # raises to write nothing (a caller's key revoked during the read)
        agent.save(update_fields=[*fields, "updated_at"])
        if read is not None:
            store_document(agent, read)


def record_failure(
    agent: AgentProfile,
    reason: str,
    *,
    retry: bool,
    reachable: bool = False,
    guard: Callable[[], None] | None = None,
) -> None:
    """Record why ``agent``'s card was not read (``card_error``, a retry time, and health
    while no card was ever read)."""
    agent.card_error = reason[:2000]
    fields = ["card_error"]
    if retry:
        agent.card_retry_after = timezone.now() + timedelta(
            seconds=settings.AGENT_CARD_RETRY_SECONDS
        )
        fields.append("card_retry_after")
    if agent.card_read_at is None and not reachable:
        # Never read: health says the agent is unreachable meanwhile.
        agent.health_status = HealthStatus.UNHEALTHY
        agent.health_error = f"{CARD_NOT_READ}: {agent.card_error}"
        agent.health_checked_at = timezone.now()
        fields += ["health_status", "health_error", "health_checked_at"]
    _save(agent, fields, None, guard)


def refresh_card(
    agent: AgentProfile,
    *,
    strict: bool = True,
    timeout: float | None = None,
    guard: Callable[[], None] | None = None,
) -> CardRead | None:
    """Read ``agent``'s card now and store it; None when unreachable (recorded).

    A served card that is not usable raises ``ValidationFailed`` when ``strict`` (the agent
    or an operator asked) and is recorded in ``card_error`` otherwise; either way the
    previous card stays in use. ``guard`` runs in the transaction that writes, after the
    card was read: whatever it raises leaves the profile as it was.
    """
    try:
        read = fetch_card(agent.agent_card_url, agent.a2a_endpoint, timeout=timeout)
    except CardUnreachable as exc:
        record_failure(agent, exc.describe(), retry=not strict, reachable=exc.answered, guard=guard)
        return None
    except ValidationFailed as exc:
        if strict:
            raise
        record_failure(agent, exc.message, retry=True, guard=guard)
        return None
    _save(agent, apply_card(agent, read), read, guard)
    logger.info(
        "Agent %s: card read from %s; calling %s",
        agent.pk,
        read.source_url,
        read.chosen.describe(),
        extra={"agent_id": agent.pk},
    )
    return read


def ensure_card(agent: AgentProfile) -> None:
    """Read ``agent``'s card if it was never read (before a call). Cheap when it was.

    Never raises for a card that cannot be read: the reason is recorded on the profile
    (``card_error``, and health while no card was ever read) and the call goes ahead on the
    registration's statement. After a failed attempt, the next is not before
    ``AGENT_CARD_RETRY_SECONDS``.
    """
    if agent.card_read_at is not None:
        return
    if not (agent.agent_card_url or agent.a2a_endpoint):
        return
    if agent.card_retry_after is not None and agent.card_retry_after > timezone.now():
        return
    # The first tasks for a new agent start together, each on its own thread: one reads
    # the card, the others wait for it and take what it found (from the row), rather than
    # every thread fetching the same card (or waiting out the same unreachable one).
    with reading(agent.pk) as (asked, read):
        if read.ended > asked:
            agent.refresh_from_db()
            return
        try:
            # Before a call: never longer than one call to the agent may take.
            timeout = min(settings.AGENT_CARD_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
            refresh_card(agent, strict=False, timeout=timeout)
        except Exception:  # a card problem must never break a call
            logger.exception(
                "Agent %s: reading the card failed", agent.pk, extra={"agent_id": agent.pk}
            )
        finally:
            read.ended = time.monotonic()


def card_json(agent: AgentProfile) -> str:
    """The stored card document, pretty-printed ("" when none)."""
    row = AgentCard.objects.filter(agent=agent).first()
    return json.dumps(row.document, indent=2, ensure_ascii=False) if row else ""
