"""Which agent a new task goes to: the one its caller names, the one holding the
conversation it continues, else the matcher's pick (:mod:`agent_profiles.matching`).

An agent calling with its key on a route that names no agent is never matched to itself:
it sent the task to have it done elsewhere (a router forwarding its skill took its own
tasks back, one after the other, without end, once the rest of the pool was down). It
names itself on its own route (``/v1/a2a/{agentId}``) to take one.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from a2a import lookups
from a2a.exceptions import UnknownAgent
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.matching import match_agent
from agent_profiles.models import AgentProfile, Skill


def choose_agent(
    skill: Skill,
    agent_id: str | None,
    active: dict[str, int] | None = None,
    prefer: str | None = None,
    caller: str | None = None,
) -> tuple[AgentProfile, dict[str, Any]]:
    """The caller's agent (checked), else ``prefer`` while it may take the skill (the agent
    of the conversation the task continues), else the matcher's pick among the cached
    candidates; neither of the last two is ``caller`` (the id of the agent sending it).

    ``active`` (active task counts per candidate) saves the matcher its count query; a
    batch passes it and counts its own picks in.
    """
    if agent_id:
        agent = lookups.candidate(skill, agent_id)
        if agent is None:
            raise _refusal(skill, agent_id)
        return agent, {"agentId": agent.id, "chosenBy": "caller", "at": _now()}
    if prefer and prefer != caller and (agent := lookups.candidate(skill, prefer)) is not None:
        lookups.assigned(agent.id)
        return agent, {"agentId": agent.id, "chosenBy": "context", "at": _now()}
    candidates = _others(skill, caller)
    if not candidates:  # never refuse from the cache
        candidates = _others(skill, caller, fresh=True)
    if not candidates and caller:
        raise NoAgentAvailable(
            f"No active agent offers the skill '{skill.id}' but the caller, agent "
            f"'{caller}': it is not sent its own task. Send it to /v1/a2a/{caller} to "
            "take it.",
            {"skillId": skill.id, "callerAgentId": caller},
        )
    if active is None:
        active = lookups.load(candidates)
    agent, match = match_agent(skill, agents=candidates, active=active)
    lookups.assigned(agent.id)
    return agent, match


def _others(skill: Skill, caller: str | None, *, fresh: bool = False) -> list[AgentProfile]:
    return [a for a in lookups.candidates(skill, fresh=fresh) if a.id != caller]


def _now() -> str:
    return timezone.now().isoformat()


def _refusal(skill: Skill, agent_id: str) -> UnknownAgent:
    """Why ``agent_id`` may not take the skill: unknown, not active, or not offering it."""
    agent = AgentProfile.objects.filter(pk=agent_id).first()
    if agent is None:
        return UnknownAgent(f"Unknown agent '{agent_id}'.", {"agentId": agent_id})
    if not agent.is_active:
        return UnknownAgent(
            f"Agent '{agent_id}' is {agent.status}, not active.", {"agentId": agent_id}
        )
    return UnknownAgent(
        f"Agent '{agent_id}' does not offer the skill '{skill.id}'.",
        {"agentId": agent_id, "skillId": skill.id},
    )
