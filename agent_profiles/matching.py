"""Choosing the agent for a task: a documented score with a deterministic tie-break.

Among the *active* agents that registered the skill, each gets a score in [0, 1]:

=========  ======  ===================================================================
term       weight  value
=========  ======  ===================================================================
fit        0.25    domain match 0.6 + subdomain match 0.4 (against the requested
                   domain/subdomain, defaulting to the skill's); an agent that declares
                   no domain gets half marks for that part
success    0.30    (completed + 1) / (finished + 2) over its last MATCH_WINDOW finished
                   tasks of the last MATCH_WINDOW_DAYS days that it answers for (a new
                   agent scores 0.5): not cancels, not tasks it created itself (see
                   a2a.match_stats)
load       0.20    1 / (1 + tasks it has in SUBMITTED or WORKING)
latency    0.10    1 / (1 + mean seconds creation→COMPLETED / 10) over the same window
                   (0.5 without data)
online     0.15    1 when connected to the gateway, healthy (agent_profiles.health) or
                   seen in the last ONLINE_WINDOW seconds; 0 when known unreachable
                   (unhealthy and not connected); 0.5 when it has an A2A endpoint of
                   unknown health; 0 otherwise (a socket-only agent that is offline)
=========  ======  ===================================================================

An agent known unreachable (its health is unhealthy: a failed check, an unreadable card,
a failed call such as ``agent_auth_failed``) and not connected to the gateway is never
chosen while another candidate can take the task; it stays a candidate when every agent of
the skill is in that state. Ties go to the agent with fewer active tasks, then to the
smaller agent id. The winner's breakdown (and the runner-ups' scores) is saved in
``task.metadata["match"]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.core.cache import cache
from django.utils import timezone

from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.health import is_known_unreachable
from agent_profiles.models import AgentProfile, AgentStatus, HealthStatus, Skill

WEIGHTS: dict[str, float] = {
    "fit": 0.25,
    "success": 0.30,
    "load": 0.20,
    "latency": 0.10,
    "online": 0.15,
}
MATCH_WINDOW = 50  # finished tasks per agent considered
MATCH_WINDOW_DAYS = 7
ONLINE_WINDOW = 300.0  # seconds since last_seen_at that count as online
# Success and latency history change slowly: it is cached this long (Django's cache), so
# a burst of task creations does not re-read the same history for every task.
HISTORY_CACHE_SECONDS = 5.0
# Gateway presence is read at most this often per process (a hint, not a guarantee).
PRESENCE_CACHE_SECONDS = 2.0


class TaskStats(Protocol):
    """Load and recent results per agent, from the tasks (``a2a`` registers one)."""

    def active_counts(self, agent_ids: list[str]) -> dict[str, int]: ...

    def recent_outcomes(
        self, agent_ids: list[str], since: datetime, per_agent: int
    ) -> dict[str, list[tuple[bool, float]]]:
        """Up to ``per_agent`` finished tasks of each agent since ``since``, newest first:
        (completed?, seconds from creation to the end). Only outcomes the agent answers
        for: a caller (or the agent itself) must not be able to write its record."""
        ...


class _NoTasks:
    """Before the task app registers its statistics: no load, no history."""

    def active_counts(self, agent_ids: list[str]) -> dict[str, int]:
        return {}

    def recent_outcomes(
        self, agent_ids: list[str], since: datetime, per_agent: int
    ) -> dict[str, list[tuple[bool, float]]]:
        return {}


# The registry sits below the apps that know tasks and sockets: they register these at
# app start (A2AConfig.ready, GatewayConfig.ready), so imports keep pointing one way.
_task_stats: TaskStats = _NoTasks()
_presence: Callable[[], set[str]] | None = None


def register_task_stats(stats: TaskStats) -> None:
    """Let the matcher read load and history (the task app calls this at start)."""
    global _task_stats
    _task_stats = stats


def register_presence(online_agent_ids: Callable[[], set[str]]) -> None:
    """Let the matcher know who is connected (the gateway calls this at start)."""
    global _presence
    _presence = online_agent_ids


def _online_ids() -> set[str] | None:
    """Agents connected to the gateway (cached PRESENCE_CACHE_SECONDS), or None when
    presence cannot be read (then ``last_seen_at`` decides)."""
    cached = cache.get("match-online-ids")
    if cached is not None:
        return set(cached)
    if _presence is None:
        return None
    ids = _call(_presence)
    if ids is not None:
        cache.set("match-online-ids", sorted(ids), PRESENCE_CACHE_SECONDS)
    return ids


def _call(provider: Callable[[], set[str]]) -> set[str] | None:
    try:
        return set(provider())
    except Exception:  # presence is a hint; never let it break matching
        return None


def _fit(agent: AgentProfile, domain: str, subdomain: str) -> float:
    def part(mine: str, wanted: str) -> float:
        if not wanted:
            return 1.0
        if not mine:
            return 0.5
        return 1.0 if mine.lower() == wanted.lower() else 0.0

    return 0.6 * part(agent.domain, domain) + 0.4 * part(agent.subdomain, subdomain)


def active_counts(agent_ids: list[str]) -> dict[str, int]:
    """Tasks each agent has in SUBMITTED or WORKING now (one query)."""
    return _task_stats.active_counts(agent_ids)


def _history(
    agent_ids: list[str], active: dict[str, int] | None = None
) -> tuple[dict[str, int], dict[str, list[tuple[bool, float]]]]:
    """Active task counts (now, unless given) and recent (completed?, seconds) of
    finished tasks, per agent."""
    if active is None:
        active = active_counts(agent_ids)
    digest = hashlib.sha256("\0".join(agent_ids).encode()).hexdigest()[:32]
    key = f"match-history:{digest}"
    recent = cache.get(key)
    if recent is None:
        since = timezone.now() - timedelta(days=MATCH_WINDOW_DAYS)
        recent = _task_stats.recent_outcomes(agent_ids, since, MATCH_WINDOW)
        cache.set(key, recent, HISTORY_CACHE_SECONDS)
    return active, recent


def score_agents(
    skill: Skill,
    *,
    domain: str | None = None,
    subdomain: str | None = None,
    agents: list[AgentProfile] | None = None,
    active: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Every candidate's score breakdown, best first (the tie-break applied).

    ``agents`` (the active agents offering the skill) and ``active`` (their active task
    counts, see :func:`active_counts`) may come from the caller, which then saves their
    queries (task creation caches the first and counts the second once per batch).
    """
    if agents is None:
        agents = list(skill.agents.filter(status=AgentStatus.ACTIVE).order_by("id"))
    if not agents:
        return []
    want_domain = skill.domain if domain is None else domain
    want_subdomain = skill.subdomain if subdomain is None else subdomain
    active, recent = _history([a.id for a in agents], active)
    online = _online_ids()
    now = timezone.now()
    rows = []
    for agent in agents:
        finished = recent.get(agent.id, [])
        completed = [secs for done, secs in finished if done]
        seen = agent.last_seen_at is not None and (
            (now - agent.last_seen_at).total_seconds() <= ONLINE_WINDOW
        )
        is_online = agent.id in online if online is not None else False
        unreachable = not is_online and is_known_unreachable(agent)
        if is_online or (not unreachable and (seen or agent.health_status == HealthStatus.HEALTHY)):
            reachability = 1.0
        elif unreachable:
            reachability = 0.0
        else:
            reachability = 0.5 if agent.a2a_endpoint else 0.0
        terms = {
            "fit": _fit(agent, want_domain, want_subdomain),
            "success": (len(completed) + 1) / (len(finished) + 2),
            "load": 1 / (1 + active.get(agent.id, 0)),
            "latency": (1 / (1 + (sum(completed) / len(completed)) / 10)) if completed else 0.5,
            "online": reachability,
        }
        score = sum(WEIGHTS[k] * v for k, v in terms.items())
        rows.append(
            {
                "agent": agent,
                "agentId": agent.id,
                "score": round(score, 4),
                "terms": {k: round(v, 4) for k, v in terms.items()},
                "activeTasks": active.get(agent.id, 0),
                "finishedTasks": len(finished),
                "unreachable": unreachable,
            }
        )
    if any(not r["unreachable"] for r in rows):
        rows = [r for r in rows if not r["unreachable"]]
    rows.sort(key=lambda r: (-r["score"], r["activeTasks"], r["agentId"]))
    return rows


def match_agent(
    skill: Skill,
    *,
    domain: str | None = None,
    subdomain: str | None = None,
    agents: list[AgentProfile] | None = None,
    active: dict[str, int] | None = None,
) -> tuple[AgentProfile, dict[str, Any]]:
    """The best active agent for ``skill`` and the score breakdown for ``metadata.match``.

    ``agents`` and ``active`` as for :func:`score_agents`. Raises
    :class:`~agent_profiles.exceptions.NoAgentAvailable` (400) when no active agent
    offers it.
    """
    rows = score_agents(skill, domain=domain, subdomain=subdomain, agents=agents, active=active)
    if not rows:
        raise NoAgentAvailable(
            f"No active agent offers the skill '{skill.id}'. Register an agent for it, "
            "or approve a pending one, then create the task again.",
            {"skillId": skill.id},
        )
    best = rows[0]
    breakdown = {
        "agentId": best["agentId"],
        "score": best["score"],
        "terms": best["terms"],
        "weights": WEIGHTS,
        "candidates": [{"agentId": r["agentId"], "score": r["score"]} for r in rows[:10]],
        "at": timezone.now().isoformat(),
    }
    return best["agent"], breakdown
