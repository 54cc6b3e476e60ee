"""Cached registry reads for task creation: a skill by id, the active agents offering it
(or the one a caller names), the skills an agent offers (the face's tenant route).

Every ``POST /api/tasks`` and every ``message:send`` of the A2A face needs the skill (its
input schema) and the agents that may take it; both change rarely and are read on every
creation. They are kept per process for ``A2A_REGISTRY_CACHE_SECONDS`` and dropped at once
when this process saves or deletes a skill or an agent, changes which skills an agent
offers (Django signals), or approves or disables agents (the admin's bulk actions,
:mod:`agent_profiles.access`, announce it: :data:`~agent_profiles.signals.registry_changed`).
A change made in another process is seen within that many seconds (a task given
meanwhile to an agent disabled there goes to a worker whose claim reads the agent's status
and does not send it, :mod:`a2a.agent_standing`; only a task claimed at birth, in an
embedded platform, is sent with the cached agent), except that a refusal is never taken
from the cache: an unknown skill or agent is looked up again before the caller is told no
(an agent registered on another daphne a moment ago can take a task at once). An agent
or skill deleted in another process is still picked from the cache meanwhile: the new
task's INSERT then breaks its foreign key, and :func:`a2a.creation.create_task` drops the
cache (:func:`clear`) and chooses again from the database. The cached objects are shared
between threads and must be treated as read-only.

The candidates' load (their active task counts, which the matcher weighs) is counted once
per ``A2A_LOAD_CACHE_SECONDS`` per process instead of on every creation, and every task
this process assigns meanwhile is added to it, so a burst is still spread across agents.
Load only orders candidates: a count a second old changes who is picked first, never
whether a task is accepted.

Only what exists is cached: an unknown skill or agent id is not (it would be read again
before a refusal anyway), or any caller could grow the tables without end by naming ids
that do not exist (2,000 sends to made-up tenant routes left 2,000 entries). Each table
keeps at most :data:`LIMIT` entries: when full, the expired ones go, then the oldest.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from agent_profiles.matching import active_counts
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from agent_profiles.signals import registry_changed

_lock = threading.Lock()
_skills: dict[str, tuple[float, Skill | None]] = {}
_candidates: dict[str, tuple[float, list[AgentProfile]]] = {}
_chosen: dict[tuple[str, str], tuple[float, AgentProfile]] = {}
_loads: dict[tuple[str, ...], tuple[float, dict[str, int]]] = {}
_offers: dict[str, tuple[float, list[str] | None]] = {}
_MISSING = object()
# One more at every clear(): a row read before it is not kept after (a thread that read an
# agent before a registration's commit, and cached it after the commit's clear).
_generation = 0
# Entries per table, far more than the skills and agents of any registry seen; past it
# the expired entries are dropped, then the oldest, down to three quarters.
LIMIT = 10_000
# The clock of the entries' expiry (tests replace it).
_clock = time.monotonic


def _ttl() -> float:
    return float(getattr(settings, "A2A_REGISTRY_CACHE_SECONDS", 2.0))


def _get(store: dict[Any, tuple[float, Any]], key: Any) -> Any:
    entry = store.get(key)
    if entry is None or entry[0] < _clock():
        return _MISSING
    return entry[1]


def _put(
    store: dict[Any, tuple[float, Any]],
    key: Any,
    value: Any,
    seen: int,
    ttl: float | None = None,
) -> tuple[float, Any]:
    """Keep ``value`` for ``ttl`` seconds (the registry's by default) unless the cache was
    cleared since it was read (``seen``: :data:`_generation` before the read); the entry."""
    ttl = _ttl() if ttl is None else ttl
    entry = (_clock() + ttl, value)
    if ttl > 0:
        with _lock:
            if seen != _generation:
                return entry
            store.pop(key, None)  # put again, it goes last: the oldest stay first
            if len(store) >= LIMIT:
                _trim(store)
            store[key] = entry
    return entry


def _trim(store: dict[Any, tuple[float, Any]]) -> None:
    """Drop the expired entries, then the oldest down to three quarters of :data:`LIMIT`
    (so that a full table is not scanned on every put). Called holding the lock."""
    now = _clock()
    for key in [key for key, (until, _) in store.items() if until < now]:
        del store[key]
    excess = len(store) - LIMIT * 3 // 4
    if excess > 0:
        for key in list(itertools.islice(store, excess)):  # in the order put
            del store[key]


def skill(skill_id: str, *, fresh: bool = False) -> Skill | None:
    """The skill with this id (active or not), or None if there is none.

    ``fresh`` reads the database whatever is cached: callers do so before refusing, so a
    cache can make creation faster but never refuse what the database allows.
    """
    found = _MISSING if fresh else _get(_skills, skill_id)
    if found is _MISSING:
        seen = _generation
        found = Skill.objects.filter(pk=skill_id).first()
        if found is not None:  # an unknown id is read again anyway (see the docstring)
            _put(_skills, skill_id, found, seen)
    return found  # type: ignore[no-any-return]


def candidates(skill: Skill, *, fresh: bool = False) -> list[AgentProfile]:
    """The active agents offering ``skill``, ordered by id (``fresh``: as :func:`skill`)."""
    found = _MISSING if fresh else _get(_candidates, skill.pk)
    if found is _MISSING:
        seen = _generation
        found = list(skill.agents.filter(status=AgentStatus.ACTIVE).order_by("id"))
        _put(_candidates, skill.pk, found, seen)
    return list(found)


def candidate(skill: Skill, agent_id: str) -> AgentProfile | None:
    """The active agent ``agent_id`` if it offers ``skill``, else None (a caller that names
    its agent): one row, not every candidate, and a None always comes from the database."""
    listed = _get(_candidates, skill.pk)
    if listed is not _MISSING:
        found = next((a for a in listed if a.id == agent_id), None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    found = _get(_chosen, (skill.pk, agent_id))
    if found is _MISSING:
        seen = _generation
        found = skill.agents.filter(pk=agent_id, status=AgentStatus.ACTIVE).first()
        if found is not None:
            _put(_chosen, (skill.pk, agent_id), found, seen)
    return found  # type: ignore[no-any-return]


def offered(agent_id: str, *, fresh: bool = False) -> list[str] | None:
    """The ids of the active skills the active agent ``agent_id`` offers, ordered by id;
    None if there is no such active agent (``fresh``: as :func:`skill`). The face's tenant
    route (``/v1/a2a/{agentId}``) picks its skill from these on every send."""
    found = _MISSING if fresh else _get(_offers, agent_id)
    if found is _MISSING:
        seen = _generation
        if AgentProfile.objects.filter(pk=agent_id, status=AgentStatus.ACTIVE).exists():
            found = list(
                Skill.objects.filter(agents__id=agent_id, is_active=True)
                .order_by("id")
                .values_list("id", flat=True)
            )
            _put(_offers, agent_id, found, seen)
        else:
            found = None  # not cached (see the docstring)
    return None if found is None else list(found)  # type: ignore[arg-type]


def load(agents: list[AgentProfile]) -> dict[str, int]:
    """Active task counts of these candidates (see the module's docstring); a copy."""
    key = tuple(a.id for a in agents)
    ttl = float(getattr(settings, "A2A_LOAD_CACHE_SECONDS", 1.0))
    entry = _loads.get(key)
    if entry is None or entry[0] < _clock():
        seen = _generation
        counts = active_counts(list(key))
        if ttl <= 0:
            return counts
        entry = _put(_loads, key, counts, seen, ttl)
    return dict(entry[1])


def assigned(agent_id: str) -> None:
    """Count a task this process just gave ``agent_id`` into every cached load."""
    with _lock:
        for key, (_, counts) in _loads.items():
            if agent_id in key:
                counts[agent_id] = counts.get(agent_id, 0) + 1


def clear() -> None:
    """Forget everything cached (a change in this process; tests between cases), and
    what readers read before now and would keep after."""
    global _generation
    with _lock:
        _generation += 1
        _skills.clear()
        _candidates.clear()
        _chosen.clear()
        _loads.clear()
        _offers.clear()


def _changed(sender: Any, **kwargs: Any) -> None:
    # Now, and again at the commit: until then another thread of this process reads the
    # old row, and would cache it for the whole A2A_REGISTRY_CACHE_SECONDS.
    clear()
    transaction.on_commit(clear)


for _model in (Skill, AgentProfile):
    post_save.connect(_changed, sender=_model, dispatch_uid=f"a2a.lookups.save.{_model.__name__}")
    post_delete.connect(
        _changed, sender=_model, dispatch_uid=f"a2a.lookups.delete.{_model.__name__}"
    )
m2m_changed.connect(_changed, sender=AgentProfile.skills.through, dispatch_uid="a2a.lookups.m2m")
# A bulk update of agents (approve, disable) sends no post_save: the registry says so.
registry_changed.connect(_changed, dispatch_uid="a2a.lookups.registry_changed")
