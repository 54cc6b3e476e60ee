"""Agents' pauses (``Retry-After``).

Imported by :mod:`a2a.models` so Django registers it in the ``a2a`` app.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, models, transaction

from agent_profiles.models import AgentProfile


class AgentPause(models.Model):
    """No poll or send of the agent's tasks before ``until``: the agent answered a poll
    or a send ``429`` or ``503`` with ``Retry-After`` (:mod:`a2a.agent_pauses`).

    :meth:`Task.pause_polls <a2a.scheduling.TaskScheduling.pause_polls>` also moves the
    polls due before then, but a task's next poll is written again by whichever worker
    applies its answer: the rest of the batch that met the ``429`` (quiet answers are
    re-scheduled at the batch's end), another worker's batch of the same agent, a single
    poll. The engine's claim leaves a paused agent out, and a single poll or a send
    waits, so no poll or send of its tasks goes before ``until`` whatever its row says.
    One row per agent that ever asked; only ever moved later. Fields change only through
    the verbs below.
    """

    agent = models.OneToOneField(
        AgentProfile, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    until = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.agent_id} paused until {self.until.isoformat()}"

    @classmethod
    def ask(cls, agent_id: str, until: datetime) -> None:
        """The agent asked for a pause until ``until`` (a later pause asked already stays)."""
        # The row first, then the conditional move: updating first and then finding the
        # row another worker had just created (with an earlier end) kept the earlier end.
        if not cls.objects.filter(agent_id=agent_id).exists():
            try:
                with transaction.atomic():
                    cls.objects.create(agent_id=agent_id, until=until)
                return
            except IntegrityError:  # another worker's pause came first: keep the later one
                pass
        cls.objects.filter(agent_id=agent_id, until__lt=until).update(until=until)

    @classmethod
    def paused(cls, now: datetime) -> list[str]:
        """The agents whose polls must wait at ``now``."""
        return list(cls.objects.filter(until__gt=now).values_list("agent_id", flat=True))

    @classmethod
    def until_of(cls, agent_id: str, now: datetime) -> datetime | None:
        """When the agent's pause ends, if it is paused at ``now``."""
        found = cls.objects.filter(agent_id=agent_id, until__gt=now).values_list("until")
        row = found.first()
        return row[0] if row else None
