"""What a SendMessage says, checked before anything is written: the message's shape
(:func:`validate_send`), the skill it asks for (and the agent, on a tenant route:
:func:`choose_skill`), and the input the platform records of it (:func:`input_of`,
:func:`has_data`). Used by :mod:`a2a.face.sending`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from a2a import lookups
from a2a.answer_parts import part_problem
from a2a.face.context import CallContext
from a2a.face.errors import AgentNotFound, InvalidParams
from a2a.face.ids import MAX_CLIENT_ID
from a2a.face.serializers import ROLE_USER
from agent_profiles.models import Skill


def choose_skill(ctx: CallContext, request: dict[str, Any]) -> tuple[str, str | None]:
    """The skill id (and the agent id on a tenant route) for a new task."""
    message = request["message"]
    skill_id = (request.get("metadata") or {}).get("skillId") or (
        message.get("metadata") or {}
    ).get("skillId")
    if skill_id is not None and not isinstance(skill_id, str):
        raise InvalidParams("metadata.skillId must be a string.")
    if ctx.tenant:
        return _tenant_skill(ctx.tenant, skill_id), ctx.tenant
    # The default routes: create_task checks the skill.
    if skill_id or settings.A2A_DEFAULT_SKILL:
        return str(skill_id or settings.A2A_DEFAULT_SKILL), None
    ids = list(
        Skill.objects.filter(is_active=True).order_by("id").values_list("id", flat=True)[:51]
    )
    if len(ids) == 1:
        return ids[0], None
    raise InvalidParams(
        f"Say which skill: set metadata.skillId to one of {ids}." if ids else "No skills.",
        metadata={"skills": ids},
    )


def _pick(ids: list[str] | None, skill_id: str | None) -> str | None:
    if ids is None:
        return None
    if skill_id:
        return skill_id if skill_id in ids else None
    if settings.A2A_DEFAULT_SKILL in ids:
        return str(settings.A2A_DEFAULT_SKILL)
    return ids[0] if len(ids) == 1 else None


def _tenant_skill(agent_id: str, skill_id: str | None) -> str:
    """The skill for a send to ``/v1/a2a/{agent_id}``: the one named, else the default
    skill if the agent offers it, else the agent's only skill. Picked from the cached
    registry; a refusal is always checked against the database first."""
    ids = lookups.offered(agent_id)
    chosen = _pick(ids, skill_id)
    if chosen is None:
        ids = lookups.offered(agent_id, fresh=True)
        chosen = _pick(ids, skill_id)
    if chosen is not None:
        return chosen
    if ids is None:
        raise AgentNotFound(f"No active agent {agent_id!r}.", metadata={"agentId": agent_id})
    if skill_id:
        raise InvalidParams(
            f"Agent {agent_id!r} does not offer skill {skill_id!r}; it offers {ids}.",
            metadata={"skillId": skill_id[:200], "skills": ids},
        )
    raise InvalidParams(
        f"Say which skill: set metadata.skillId to one of {ids}.", metadata={"skills": ids}
    )


def has_data(message: dict[str, Any]) -> bool:
    """Whether the message carries structured input (a data part): that input is checked
    against the skill's ``input_schema``, as on ``POST /api/tasks``. Text is the agent's
    to read; no object schema could ever accept a text-only A2A client's message."""
    parts = message.get("parts") or []
    return any(isinstance(part, dict) and isinstance(part.get("data"), dict) for part in parts)


def input_of(message: dict[str, Any]) -> dict[str, Any]:
    """What the platform records as the task's input: the first data part, else text."""
    texts = []
    for part in message.get("parts") or []:
        if isinstance(part, dict) and isinstance(part.get("data"), dict):
            return part["data"]
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return {"text": "\n".join(texts)} if texts else {}


def _client_id(message: dict[str, Any], name: str, *, required: bool) -> str:
    value = message.get(name)
    if not value:
        if required:
            raise InvalidParams(
                f"message.{name} is required.", violations=[(f"message.{name}", "required")]
            )
        return ""
    if not isinstance(value, str) or len(value) > MAX_CLIENT_ID:
        raise InvalidParams(
            f"message.{name} must be a string of at most {MAX_CLIENT_ID} characters.",
            violations=[(f"message.{name}", f"at most {MAX_CLIENT_ID} characters")],
        )
    return value


def validate_send(params: dict[str, Any]) -> dict[str, Any]:
    message = params.get("message")
    if not isinstance(message, dict):
        raise InvalidParams("message is required.", violations=[("message", "required")])
    _client_id(message, "messageId", required=True)
    _client_id(message, "contextId", required=False)
    if not message.get("parts"):
        raise InvalidParams(
            "message.parts must hold at least one part.",
            violations=[("message.parts", "at least one part")],
        )
    # Each a Part, as agents' answers are held to (a2a.answer_parts): an empty part was
    # stored, sent to the agent and served back, failing every client's read of the task.
    for i, part in enumerate(message["parts"]):
        problem = part_problem(part)
        if problem is not None:
            raise InvalidParams(
                f"message.parts[{i}] {problem}.", violations=[(f"message.parts[{i}]", problem)]
            )
    # ProtoJSON also takes an enum as its number (1). Stored as sent, it went to the agent
    # as ``"role": 1``, GetTask served it so, and 0.3 clients read it as the agent's.
    role = message.get("role")
    if role != ROLE_USER and not (type(role) is int and role == 1):
        raise InvalidParams(
            "message.role must be ROLE_USER.", violations=[("message.role", "ROLE_USER")]
        )
    message["role"] = ROLE_USER
    return message
