"""Registry services: agent registration and card refresh (skills: agent_profiles.skills).

Views and management commands call these; they validate, write inside one transaction
and raise :class:`~platform_site.errors.PlatformError` subclasses a caller can act on.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from agent_profiles.cards import (
    CARD_NOT_READ,
    CardRead,
    CardUnreachable,
    apply_card,
    fetch_card,
    refresh_card,
    store_document,
)
from agent_profiles.credentials import set_credentials
from agent_profiles.health import listing_again, polling_again
from agent_profiles.models import (
    RESERVED_AGENT_IDS,
    AgentProfile,
    AgentStatus,
    ApiKey,
    HealthStatus,
    Skill,
)
from agent_profiles.urlguard import check_url
from platform_site.errors import Conflict, Forbidden, PlatformError, ValidationFailed

# One INFO line per registration (docs/operations.md, "Logs").
lifecycle = logging.getLogger("agent_profiles.lifecycle")
log = logging.getLogger(__name__)


class UnknownSkills(ValidationFailed):
    code = "unknown_skills"


class RegistrationRefused(Forbidden):
    code = "registration_token_required"


@dataclass(frozen=True)
class Registration:
    """The outcome of :func:`register_agent`: the profile and, for a new agent, its key."""

    agent: AgentProfile
    created: bool
    api_key: str | None = None


PROFILE_FIELDS = (
    "name",
    "description",
    "a2a_endpoint",
    "domain",
    "subdomain",
    "version",
    "metadata",
    "agent_card_url",
    "protocol_binding",
    "protocol_version",
    "target",
    "timeout",
    "poll_interval",
)
# Cleared by ``null`` to None rather than "".
NULLABLE_FIELDS = ("timeout", "poll_interval")
# What a card read sets; forgotten when the card's location changes and it cannot be read.
CARD_FIELDS = {
    "interface": dict,
    "streaming": bool,
    "push_notifications": bool,
    "security_schemes": dict,
    "security_requirements": list,
}


@dataclass(frozen=True)
class CardAttempt:
    """The card read at registration, or why none was."""

    read: CardRead | None = None
    unreachable: str = ""  # why no card was read ("" when read or not looked for)
    answered: bool = False  # the agent answered, but serves no card


def register_agent(
    data: dict[str, Any],
    *,
    caller_agent: AgentProfile | None = None,
    registration_token: str | None = None,
    caller_key_prefix: str | None = None,
) -> Registration:
    """Create a new agent, or update an existing one when its own key is presented.

    ``data`` holds validated, snake_case fields (``agent_id``, ``skill_ids`` and the
    optional profile fields). A new agent gets an API key (shown once); in ``approval``
    mode it starts pending. An existing id without its own key is a :class:`Conflict`.
    ``caller_key_prefix``: the prefix of the key the caller authenticated with, checked
    again under the lock (:func:`check_key_live`).
    """
    agent_id: str = data["agent_id"]
    check_agent_id(agent_id)
    skills = resolve_skills(data["skill_ids"])
    for field in ("a2a_endpoint", "agent_card_url"):
        if data.get(field):
            check_url(data[field])  # no DNS here: the card fetch resolves and pins
    known = AgentProfile.objects.filter(pk=agent_id).first()
    if known is not None:
        _check_owner(known, caller_agent)  # before the platform fetches anything for them
    else:
        check_registration_token(registration_token)
    # The card is read before the transaction: no lock is held while an agent answers.
    card = read_card_for(data, known)
    with transaction.atomic():
        if caller_agent is not None:
            # The key's row before the agent's: a rotation locks them in that order too
            # (revoking the old key, then inserting the new one under the agent).
            check_key_live(caller_agent.pk, caller_key_prefix)
        existing = AgentProfile.objects.select_for_update().filter(pk=agent_id).first()
        if existing is not None:
            agent = _update(existing, data, skills, caller_agent, card)
            registration = Registration(agent, created=False)
        else:
            check_registration_token(registration_token)
            registration = _create(agent_id, data, skills, card)
    agent = registration.agent
    lifecycle.info(
        "agent %s registered (%s, %s): skills %s",
        agent.pk,
        "new" if registration.created else "updated",
        agent.status,
        ", ".join(s.pk for s in skills),
        extra={"agent_id": agent.pk},
    )
    return registration


def read_card_for(data: dict[str, Any], known: AgentProfile | None) -> CardAttempt:
    """Read the card a registration points to. A served card that is not usable raises
    ``ValidationFailed`` (400, nothing saved); an unreachable one is no error."""

    def current(field: str) -> str:
        if field in data:
            return data[field] or ""
        return getattr(known, field) if known is not None else ""

    card_url, endpoint = current("agent_card_url"), current("a2a_endpoint")
    if not (card_url or endpoint):
        return CardAttempt()
    try:
        return CardAttempt(read=fetch_card(card_url, endpoint))
    except CardUnreachable as exc:
        return CardAttempt(unreachable=exc.describe(), answered=exc.answered)


def _apply_card_attempt(agent: AgentProfile, card: CardAttempt, moved: bool) -> None:
    if card.read is not None:
        apply_card(agent, card.read)
        return
    if moved:
        # The old card described another location: the registration's statement rules
        # until the new card is read (ensure_card, before the first call).
        for name, kind in CARD_FIELDS.items():
            setattr(agent, name, kind())
        agent.card_read_at = None
        agent.card_retry_after = None
        agent.card_error = ""
    if card.unreachable:
        agent.card_error = card.unreachable[:2000]
        if agent.card_read_at is None and not card.answered:
            agent.health_status = HealthStatus.UNHEALTHY
            agent.health_error = f"{CARD_NOT_READ}: {agent.card_error}"
            agent.health_checked_at = timezone.now()


def check_agent_id(agent_id: str) -> None:
    """Refuse ids that would collide with the A2A face's own path words."""
    if agent_id.lower() in RESERVED_AGENT_IDS:
        raise ValidationFailed(
            f"agentId '{agent_id}' is reserved by the platform's A2A routes; choose another.",
            {"agentId": agent_id, "reserved": sorted(RESERVED_AGENT_IDS)},
            code="reserved_agent_id",
        )


def resolve_skills(skill_ids: Iterable[str]) -> list[Skill]:
    """The active skills with these ids, or :class:`UnknownSkills` naming the others."""
    wanted = list(dict.fromkeys(skill_ids))
    found = {s.id: s for s in Skill.objects.filter(pk__in=wanted, is_active=True)}
    unknown = [sid for sid in wanted if sid not in found]
    if unknown:
        raise UnknownSkills(
            f"Unknown skill ids: {', '.join(unknown)}. GET /api/a2a/skills lists the skills.",
            {"unknownSkillIds": unknown},
        )
    return [found[sid] for sid in wanted]


def check_registration_token(presented: str | None) -> None:
    """In ``token`` mode a new registration must present ``REGISTRATION_TOKEN``."""
    if settings.REGISTRATION_MODE != "token":
        return
    expected = settings.REGISTRATION_TOKEN
    if not presented or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise RegistrationRefused(
            "Registering a new agent needs the registration token in the "
            "X-Registration-Token header; ask the platform operator for it."
        )


def _create(
    agent_id: str, data: dict[str, Any], skills: list[Skill], card: CardAttempt
) -> Registration:
    status = AgentStatus.PENDING if settings.REGISTRATION_MODE == "approval" else AgentStatus.ACTIVE
    fields = {f: data[f] for f in PROFILE_FIELDS if data.get(f) is not None}
    agent = AgentProfile(id=agent_id, status=status, **fields)
    _apply_card_attempt(agent, card, moved=False)
    if data.get("auth") is not None:
        set_credentials(agent, data["auth"])
    _validate(agent)
    try:
        with transaction.atomic():
            agent.save(force_insert=True)
    except IntegrityError:
        if not AgentProfile.objects.filter(pk=agent_id).exists():
            raise  # not the race below: a constraint the checks above let through
        # Another registration of the same id won the race.
        raise _taken(agent_id) from None
    if card.read is not None:
        store_document(agent, card.read)
    agent.skills.set(skills)
    key = agent.issue_key()
    agent.touch()
    return Registration(agent, created=True, api_key=key)


def _check_owner(agent: AgentProfile, caller: AgentProfile | None) -> None:
    if caller is None or caller.pk != agent.pk:
        raise _taken(agent.pk)
    if agent.status == AgentStatus.DISABLED:
        raise Forbidden(
            f"Agent '{agent.pk}' is disabled; ask the platform operator to enable it.",
            code="agent_disabled",
        )


def _update(
    agent: AgentProfile,
    data: dict[str, Any],
    skills: list[Skill],
    caller: AgentProfile | None,
    card: CardAttempt,
) -> AgentProfile:
    _check_owner(agent, caller)
    where = (agent.agent_card_url, agent.a2a_endpoint)
    for field in PROFILE_FIELDS:
        if field in data:
            setattr(agent, field, data[field] if data[field] is not None else _blank(field))
    _apply_card_attempt(agent, card, moved=where != (agent.agent_card_url, agent.a2a_endpoint))
    if "auth" in data:
        set_credentials(agent, data["auth"])  # rotation; null clears
    _validate(agent)
    agent.save()
    if card.read is not None:
        store_document(agent, card.read)
    agent.skills.set(skills)
    agent.touch()
    listing_again(agent)
    polling_again(agent)
    return agent


def refresh_agent_card(
    agent_id: str, *, caller: Any, caller_key_prefix: str | None = None
) -> AgentProfile:
    """Read the agent's card again now (the agent itself with its key, or a staff user who
    may change agent profiles: the admin's *Refresh the agent card* takes that too).
    ``caller_key_prefix``: the agent's key, checked again when the card is stored.

    A served card that is not usable raises ``ValidationFailed`` (400) and the previous
    card stays; an unreachable one is recorded (``card.error`` in the profile).
    """
    agent = AgentProfile.objects.filter(pk=agent_id).first()
    own = getattr(caller, "agent", None)
    # Plain is_staff is not enough: a view-only or helpdesk staff account must not do
    # through the API what the admin refuses it.
    operator = getattr(caller, "is_staff", False) and caller.has_perm(
        "agent_profiles.change_agentprofile"
    )
    allowed = operator or (own is not None and own.pk == agent_id)
    if agent is None or not allowed:
        # The same answer for "not yours" and "no such agent": ids are not probed.
        raise Forbidden(
            f"Only agent '{agent_id}' itself (its API key) or an operator who may change agent "
            "profiles may refresh its card.",
            {"agentId": agent_id},
        )
    if own is not None:
        _check_owner(agent, own)  # a disabled agent cannot update itself, its card included
    if not (agent.agent_card_url or agent.a2a_endpoint):
        raise ValidationFailed(
            f"Agent '{agent_id}' has neither agentCardUrl nor a2aEndpoint: no card to read.",
            {"agentId": agent_id},
            code="no_agent_card",
        )

    def still_allowed() -> None:
        # The card may be slow (the caller serves it): a disable or a key revoked
        # meanwhile holds, as registration's update re-checks under its lock.
        if own is None:
            return
        check_key_live(agent_id, caller_key_prefix)  # the key's row first, as above
        _check_owner(AgentProfile.objects.select_for_update().get(pk=agent_id), own)

    if refresh_card(agent, strict=True, guard=still_allowed) is not None:
        listing_again(agent)
        polling_again(agent)
    agent.refresh_from_db()
    return agent


def check_key_live(agent_id: str, key_prefix: str | None) -> None:
    """Inside the writing transaction: the key the caller authenticated with (its prefix)
    is still live, else 401 as for any revoked key. Authentication ran before the card was
    read, which the caller controls (a slow card): an update must not land with a key the
    operator rotated or revoked meanwhile (docs: the old key stops working at once).

    The key row is locked (take it before the agent's row): a rotation or revocation
    running now waits for this write, or this check waits for it and sees the key revoked.
    None: no key (not an agent's own request); nothing to check.
    """
    if key_prefix is None:
        return
    live = ApiKey.objects.select_for_update().filter(
        prefix=key_prefix, agent_id=agent_id, revoked_at__isnull=True
    )
    if not list(live.values_list("pk", flat=True)[:1]):
        raise AuthenticationFailed("Invalid or revoked API token.")


def _taken(agent_id: str) -> PlatformError:
    return Conflict(
        f"agentId '{agent_id}' is already registered. To update it, send its API key as "
        "'Authorization: Bearer <apiKey>'; otherwise choose another agentId.",
        {"agentId": agent_id},
        code="agent_exists",
    )


def _blank(field: str) -> Any:
    if field in NULLABLE_FIELDS:
        return None
    return {} if field == "metadata" else ""


def _validate(agent: AgentProfile) -> None:
    try:
        agent.full_clean(exclude=["skills"], validate_unique=False)
    except ValidationError as exc:
        details = exc.message_dict
        raise ValidationFailed(
            "The profile is invalid: "
            + "; ".join(f"{k}: {' '.join(v)}" for k, v in details.items()),
            details,
        ) from None
