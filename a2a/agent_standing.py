"""Whether a task's agent may be sent work now: it is active, and offers the task's skill.

docs/registry.md: a disabled agent, or one awaiting approval, "gets no new work".
Creation and a reassign choose among the active agents of the skill only
(:mod:`a2a.lookups`); this is the same rule for what comes after, when the agent changed
while its task was in flight. A person's reply or retry is refused up front
(:func:`refuse_if_unable`: :class:`~a2a.exceptions.AgentInactive`, 409, the task left as
it was for a person to reassign), and a send the worker finds due for such an agent is
not made: the task moves to another agent of the skill, else ends FAILED
``agent_inactive`` (:func:`a2a.reassign.move_off_unable`).
"""

from __future__ import annotations

from typing import Any

from a2a import lookups
from a2a.exceptions import AgentInactive
from a2a.models import Task
from agent_profiles.models import AgentProfile, AgentStatus

#: The task's error code (and a refusal's) when its agent may not be sent the task.
CODE = "agent_inactive"

# Why the agent takes no work, by its status (``details.reason``: the status itself); the
# gateway's offline expiry says the same.
STATUS_TEXT = {
    AgentStatus.DISABLED: "is disabled",
    AgentStatus.PENDING: "is awaiting approval",
}
SKILL_DROPPED = "skill_dropped"
GONE = "deleted"


def unable(task: Task, *, read_again: bool = False, skill: bool = True) -> dict[str, Any] | None:
    """Why the task's agent may not be sent it now (``{"reason", "message"}``), or None.

    The agent's status is the task's row's as read with it (a worker's claim reads it
    fresh), or read again when ``read_again`` (a person's action on a task read earlier:
    an admin's bulk disable sends no signal, and no cache would see it). ``skill``: also
    whether the agent still offers the task's skill (a re-registration may drop it),
    from the registry cache when it says yes, from the database when it says no (as for
    creation: a refusal is never taken from a cache)."""
    status = _status_now(task) if read_again else task.agent.status
    if (
        status == AgentStatus.ACTIVE
        and skill
        and lookups.candidate(task.skill, task.agent_id) is None
    ):
        # Not an active agent of the skill in the database: which of the two?
        status = _status_now(task)
        if status == AgentStatus.ACTIVE:
            return _why(SKILL_DROPPED, f"no longer offers skill '{task.skill_id}'")
    if status == AgentStatus.ACTIVE:
        return None
    if status is None:
        return _why(GONE, "no longer exists")
    return _why(str(status), STATUS_TEXT.get(status, f"is {status}"))


def refuse_if_unable(task: Task, verb: str, *, skill: bool = True) -> None:
    """Refuse a person's ``verb`` (``reply``, ``retry``) of a task whose agent may not be
    sent it (:func:`unable`, read again): :class:`AgentInactive`, nothing changed."""
    why = unable(task, read_again=True, skill=skill)
    if why is None:
        return
    raise AgentInactive(
        f"Agent '{task.agent_id}' {why['message']}: it takes no work, so the {verb} was "
        f"not sent and task {task.id} is left as it was. Reassign the task to another "
        f"agent of skill '{task.skill_id}' (or make the agent active again).",
        {"agentId": task.agent_id, "skillId": task.skill_id, "reason": why["reason"]},
    )


def _status_now(task: Task) -> str | None:
    """The agent's status in the database (None: no such agent)."""
    found = AgentProfile.objects.filter(pk=task.agent_id).values_list("status", flat=True)
    return found.first()


def _why(reason: str, text: str) -> dict[str, Any]:
    return {"reason": reason, "message": text}
