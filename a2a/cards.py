"""A2A 1.0 AgentCards: the platform's own and one per registered agent.

Cards are built with the official a2a-sdk's ``AgentCard`` protobuf and rendered with
``MessageToDict``, so field names and nesting are exactly what A2A clients parse.
An agent's card points at the platform's tenant routes ``/v1/a2a/{agentId}``: clients
reach the agent through the platform, with the platform's capabilities.

The JSON-RPC URL also serves A2A 0.3 (see :mod:`a2a.face.legacy`), listed as a third
interface with protocol version 0.3. Rendered as the official SDK's servers render cards,
the card also carries the fields a 0.3 client reads (``url``, ``preferredTransport``,
``protocolVersion``, ``additionalInterfaces`` pointing at that interface, ``security``,
``supportsAuthenticatedExtendedCard`` and the 0.3 keys of the bearer scheme); 1.0 clients
ignore them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2 as pb
from agent_profiles.models import AgentProfile, AgentStatus, Skill

PROTOCOL_VERSION = "1.0"
LEGACY_PROTOCOL_VERSION = "0.3"
# The top-level 0.3 card fields added beside the 1.0 ones (a 0.3 client reads nothing
# else); the bearer scheme also gets its 0.3 keys (``type``, ``scheme``).
LEGACY_CARD_FIELDS = (
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
)
PLATFORM_VERSION = "1.0.0"
DEFAULT_MODES = ["application/json", "text/plain"]
BEARER_SCHEME = "bearer"


def platform_card(*, extended: bool = False) -> dict[str, Any]:
    """The platform's own AgentCard: every active skill, on the default routes.

    The extended card (served to authenticated callers when
    ``A2A_EXTENDED_CARD_BEARER_TOKEN`` is set) also names the agents offering each skill.
    """
    skills = Skill.objects.filter(is_active=True)
    if extended:
        skills = skills.prefetch_related("agents")
    card = _card(
        name=settings.PLATFORM_NAME,
        description=(
            "An A2A agent platform: send it a task for one of its skills and it routes the "
            "task to a registered agent, follows it to the end and checks the result."
        ),
        version=PLATFORM_VERSION,
        base_url=f"{settings.PUBLIC_URL}/v1/a2a",
        skills=[_skill(s, offered_by=_offering_agents(s) if extended else None) for s in skills],
    )
    return _to_dict(card)


def agent_card(agent: AgentProfile) -> dict[str, Any]:
    """The card of one registered agent, reachable through the platform's tenant routes."""
    skills = agent.skills.filter(is_active=True)
    card = _card(
        name=agent.name or agent.id,
        description=agent.description or f"Agent {agent.id}, reached through the platform.",
        version=agent.version or PLATFORM_VERSION,
        base_url=f"{settings.PUBLIC_URL}/v1/a2a/{agent.id}",
        skills=[_skill(s) for s in skills],
    )
    return _to_dict(card)


def _card(
    *, name: str, description: str, version: str, base_url: str, skills: Iterable[pb.AgentSkill]
) -> pb.AgentCard:
    card = pb.AgentCard(
        name=name,
        description=description,
        version=version,
        documentation_url=f"{settings.PUBLIC_URL}/api/docs/",
        provider=pb.AgentProvider(organization=settings.PLATFORM_NAME, url=settings.PUBLIC_URL),
        supported_interfaces=[
            pb.AgentInterface(
                url=base_url, protocol_binding="HTTP+JSON", protocol_version=PROTOCOL_VERSION
            ),
            pb.AgentInterface(
                url=f"{base_url}/jsonrpc",
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION,
            ),
            pb.AgentInterface(
                url=f"{base_url}/jsonrpc",
                protocol_binding="JSONRPC",
                protocol_version=LEGACY_PROTOCOL_VERSION,
            ),
        ],
        capabilities=pb.AgentCapabilities(
            streaming=True,
            push_notifications=True,
            extended_agent_card=bool(settings.A2A_EXTENDED_CARD_BEARER_TOKEN),
        ),
        default_input_modes=DEFAULT_MODES,
        default_output_modes=DEFAULT_MODES,
        skills=list(skills),
    )
    card.security_schemes[BEARER_SCHEME].CopyFrom(
        pb.SecurityScheme(
            http_auth_security_scheme=pb.HTTPAuthSecurityScheme(
                scheme="Bearer",
                description=(
                    "A platform user's API token (manage.py apitoken) or an agent's API key."
                ),
            )
        )
    )
    if not settings.A2A_ALLOW_ANONYMOUS:
        requirement = card.security_requirements.add()
        requirement.schemes[BEARER_SCHEME].CopyFrom(pb.StringList())
    return card


def _skill(skill: Skill, *, offered_by: list[str] | None = None) -> pb.AgentSkill:
    description = skill.description or skill.name
    if offered_by is not None:
        description += f"\n\nOffered by: {', '.join(offered_by) or 'no active agent yet'}."
    tags = list(dict.fromkeys([*skill.tags, *(t for t in (skill.domain, skill.subdomain) if t)]))
    # AgentSkill.tags is REQUIRED, so at least one: the skill's id, as the name stands in
    # for a missing description (the registry allows a skill with no tags nor domain).
    tags = [str(t) for t in tags if str(t)] or [skill.id]
    return pb.AgentSkill(
        id=skill.id,
        name=skill.name,
        description=description,
        tags=tags,
        # As written: escaped, an example's own text read as \u00e0 in the card.
        examples=[
            e if isinstance(e, str) else json.dumps(e, ensure_ascii=False) for e in skill.examples
        ],
        input_modes=skill.input_modes or DEFAULT_MODES,
        output_modes=skill.output_modes or DEFAULT_MODES,
    )


def _offering_agents(skill: Skill) -> list[str]:
    return sorted(a.id for a in skill.agents.all() if a.status == AgentStatus.ACTIVE)


def _to_dict(card: pb.AgentCard) -> dict[str, Any]:
    # The official SDK's rendering, with the 0.3 fields a 0.3 client reads merged in
    # (its interface, ``security`` and the 0.3 form of the bearer scheme, without which
    # a 0.3 SDK's auth interceptor sends no credentials, ``supportsAuthenticatedExtendedCard``).
    data = agent_card_to_dict(card)
    data.setdefault("skills", [])  # required by A2A even when empty
    # Capabilities are reported even when false, so a client never has to guess.
    data["capabilities"] = {
        "streaming": card.capabilities.streaming,
        "pushNotifications": card.capabilities.push_notifications,
        "extendedAgentCard": card.capabilities.extended_agent_card,
    }
    return data
