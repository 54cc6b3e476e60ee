"""Registry services: agent registration and skill loading.

Views and management commands call these; they validate, write inside one transaction
and raise :class:`~platform_site.errors.PlatformError` subclasses a caller can act on.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from agent_profiles.models import RESERVED_AGENT_IDS, AgentProfile, AgentStatus, Skill
from agent_profiles.urlguard import check_outbound_url
from platform_site.errors import Conflict, Forbidden, PlatformError, ValidationFailed
from platform_site.text import find_bad_text


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
)


def register_agent(
    data: dict[str, Any],
    *,
    caller_agent: AgentProfile | None = None,
    registration_token: str | None = None,
) -> Registration:
    """Create a new agent, or update an existing one when its own key is presented.

    ``data`` holds validated, snake_case fields (``agent_id``, ``skill_ids`` and the
    optional profile fields). A new agent gets an API key (shown once); in ``approval``
    mode it starts pending. An existing id without its own key is a :class:`Conflict`.
    """
    agent_id: str = data["agent_id"]
    check_agent_id(agent_id)
    skills = resolve_skills(data["skill_ids"])
    if data.get("a2a_endpoint"):
        check_outbound_url(data["a2a_endpoint"])
    with transaction.atomic():
        existing = AgentProfile.objects.select_for_update().filter(pk=agent_id).first()
        if existing is not None:
            return Registration(_update(existing, data, skills, caller_agent), created=False)
        check_registration_token(registration_token)
        return _create(agent_id, data, skills)


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


def _create(agent_id: str, data: dict[str, Any], skills: list[Skill]) -> Registration:
    status = AgentStatus.PENDING if settings.REGISTRATION_MODE == "approval" else AgentStatus.ACTIVE
    fields = {f: data[f] for f in PROFILE_FIELDS if data.get(f) is not None}
    agent = AgentProfile(id=agent_id, status=status, **fields)
    _validate(agent)
    try:
        with transaction.atomic():
            agent.save(force_insert=True)
    except IntegrityError:
        # Another registration of the same id won the race.
        raise _taken(agent_id) from None
    agent.skills.set(skills)
    key = agent.issue_key()
    agent.touch()
    return Registration(agent, created=True, api_key=key)


def _update(
    agent: AgentProfile, data: dict[str, Any], skills: list[Skill], caller: AgentProfile | None
) -> AgentProfile:
    if caller is None or caller.pk != agent.pk:
        raise _taken(agent.pk)
    if agent.status == AgentStatus.DISABLED:
        raise Forbidden(
            f"Agent '{agent.pk}' is disabled; ask the platform operator to enable it.",
            code="agent_disabled",
        )
    for field in PROFILE_FIELDS:
        if field in data:
            setattr(agent, field, data[field] if data[field] is not None else _blank(field))
    _validate(agent)
    agent.save()
    agent.skills.set(skills)
    agent.touch()
    return agent


def _taken(agent_id: str) -> PlatformError:
    return Conflict(
        f"agentId '{agent_id}' is already registered. To update it, send its API key as "
        "'Authorization: Bearer <apiKey>'; otherwise choose another agentId.",
        {"agentId": agent_id},
        code="agent_exists",
    )


def _blank(field: str) -> Any:
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


# --- Skills ---------------------------------------------------------------------------

# File keys (the GET /api/a2a/skills shape, plus snake_case spellings) → model fields.
SKILL_KEYS: dict[str, str] = {
    "id": "id",
    "skill_id": "id",
    "name": "name",
    "description": "description",
    "tags": "tags",
    "examples": "examples",
    "inputModes": "input_modes",
    "input_modes": "input_modes",
    "outputModes": "output_modes",
    "output_modes": "output_modes",
    "domain": "domain",
    "subdomain": "subdomain",
    "version": "version",
    "input_schema": "input_schema",
    "inputSchema": "input_schema",
    "output_schema": "output_schema",
    "outputSchema": "output_schema",
    "max_attempts": "max_attempts",
    "maxAttempts": "max_attempts",
    "is_active": "is_active",
    "isActive": "is_active",
}
STRING_LISTS = ("tags", "input_modes", "output_modes")


@dataclass(frozen=True)
class SkillLoadResult:
    created: list[str]
    updated: list[str]


def load_skills(items: Any) -> SkillLoadResult:
    """Create or update skills by id from a list in the ``GET /api/a2a/skills`` shape.

    All or nothing: every skill is checked (fields, types, JSON Schemas) before anything is
    written, and the writes run in one transaction. The first bad skill raises
    :class:`ValidationFailed` naming it.
    """
    if not isinstance(items, list):
        raise ValidationFailed("A skills file must hold a JSON/YAML array of skills.")
    parsed = [_parse_skill(item, index) for index, item in enumerate(items)]
    ids = [fields["id"] for fields in parsed]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValidationFailed(f"Duplicate skill ids: {', '.join(duplicates)}.", duplicates)
    created: list[str] = []
    updated: list[str] = []
    with transaction.atomic():
        existing = set(
            Skill.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True)
        )
        for fields in parsed:
            skill_id = fields.pop("id")
            Skill.objects.update_or_create(id=skill_id, defaults=fields)
            (updated if skill_id in existing else created).append(skill_id)
    return SkillLoadResult(created, updated)


def _parse_skill(item: Any, index: int) -> dict[str, Any]:
    label = f"skill #{index + 1}"
    if not isinstance(item, dict):
        raise ValidationFailed(f"{label}: must be an object, got {type(item).__name__}.")
    if isinstance(item.get("id"), str):
        label = f"skill '{item['id']}' (#{index + 1})"
    bad = find_bad_text(item)
    if bad is not None:
        raise ValidationFailed(f"{label}: {bad}", {"skill": label, "field": bad.where})
    unknown = sorted(k for k in item if k not in SKILL_KEYS)
    if unknown:
        raise ValidationFailed(f"{label}: unknown fields {', '.join(unknown)}.", {"skill": label})
    fields: dict[str, Any] = {}
    for key, value in item.items():
        fields[SKILL_KEYS[key]] = value
    if "id" not in fields:
        raise ValidationFailed(f"{label}: 'id' is required.", {"skill": label})
    if "name" not in fields:
        fields["name"] = fields["id"]
    for name in ("input_schema", "output_schema"):
        fields.setdefault(name, {"type": "object"})
    for name in STRING_LISTS:
        value = fields.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationFailed(f"{label}: '{name}' must be a list of strings.")
    if not isinstance(fields.get("examples", []), list):
        raise ValidationFailed(f"{label}: 'examples' must be a list.")
    skill = Skill(**fields)
    try:
        skill.full_clean(validate_unique=False)
    except ValidationError as exc:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        raise ValidationFailed(f"{label}: {problems}", exc.message_dict) from None
    return fields
