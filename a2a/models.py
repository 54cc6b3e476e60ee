"""Platform tasks, their transition history and their conversation.

One :class:`Task` row serves both directions: tasks created on the REST API (or by the
platform's A2A face) and dispatched to an external agent. The row is the source of truth:
its state, what a worker must do next (``next_action``) and when (``next_poll_at``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from a2a.scheduling import TaskScheduling
from a2a.signals import task_changed
from a2a.states import (
    INTERRUPTED_STATES,
    RETRYABLE_STATES,
    TERMINAL_STATES,
    NextAction,
    TaskState,
    Transport,
)
from agent_profiles.models import AgentProfile, Skill
from platform_site import combined
from platform_site.compiled_writes import insert_rows, update_row_returning
from platform_site.errors import Conflict


class InvalidTransition(Conflict):
    """The task is not in a state that allows this operation."""

    code = "invalid_state"


class Task(TaskScheduling, models.Model):
    """A unit of work for one skill, dispatched to one agent and followed to its end.

    State verbs (below) and scheduling verbs (:class:`~a2a.scheduling.TaskScheduling`)
    are the only ways the state and the scheduling fields change.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed through Meta.indexes, not db_index: see there.
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    agent = models.ForeignKey(
        AgentProfile, on_delete=models.PROTECT, related_name="tasks", db_index=False
    )
    state = models.CharField(max_length=32, choices=TaskState.choices, default=TaskState.SUBMITTED)
    state_changed_at = models.DateTimeField(default=timezone.now)
    # The platform-side A2A context (what the A2A face's clients see).
    context_id = models.CharField(max_length=200, default="", blank=True)
    # The agent's own ids for this task, once it answered.
    remote_task_id = models.CharField(max_length=200, blank=True)
    remote_context_id = models.CharField(max_length=200, blank=True)

    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    artifacts = models.JSONField(default=list, blank=True)
    # The agent's A2A Message while INPUT_REQUIRED / AUTH_REQUIRED.
    question = models.JSONField(null=True, blank=True)
    # The latest TaskStatus.message from the agent (any state).
    status_message = models.JSONField(null=True, blank=True)
    # {"code", "message", "details"} when the task failed or an attempt went wrong.
    error = models.JSONField(null=True, blank=True)

    transport = models.CharField(max_length=16, choices=Transport.choices, default=Transport.A2A)
    # Whether anything outside this row may follow the task: a push-notification config of
    # the face, a stream or blocking send (the distributed mode's listener marks), a gateway
    # delivery. Set at creation, by :meth:`watch` and the gateway's hand-over, never
    # cleared; every transition's UPDATE returns it, so the receivers that look for those
    # after a transition skip their statements for the tasks nothing else follows.
    watched = models.BooleanField(default=False, db_default=False)
    attempts = models.PositiveIntegerField(default=0)
    # Added to ``attempts`` by each fresh attempt: the push webhook's serial (``push_serial``).
    push_offset = models.PositiveIntegerField(default=0, db_default=0)
    # The A2A message to send on the next SEND; its messageId is stable across re-sends
    # of one attempt.
    outbound_message = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    # Who asked: a platform user, or an agent calling the A2A face with its key.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="a2a_tasks",
    )
    created_by_agent = models.ForeignKey(
        AgentProfile,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="requested_tasks",
        db_index=False,
    )
    # Asked by an anonymous caller of the A2A face (A2A_ALLOW_ANONYMOUS): the tasks such
    # callers share. Not "no creator": deleting a user or agent leaves its tasks without
    # one, and they must not pass to anonymous callers then.
    anonymous = models.BooleanField(default=False, db_default=False)
    origin = models.CharField(max_length=16, default="api")  # "api" | "a2a"
    idempotency_key = models.CharField(max_length=200, blank=True)

    # Scheduling: the worker does ``next_action`` when ``next_poll_at`` is due, holding a
    # lease (``lease_until``) so no two workers act on one task at once.
    next_action = models.CharField(
        max_length=16, choices=NextAction.choices, default=NextAction.SEND, blank=True
    )
    next_poll_at = models.DateTimeField(null=True, blank=True, db_index=True)
    poll_interval = models.FloatField(default=0.0)
    lease_until = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="task_user_idempotency_key",
            ),
            models.UniqueConstraint(
                fields=["created_by_agent", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="task_agent_idempotency_key",
            ),
        ]
        # Plain B-tree indexes declared here rather than with db_index, which on PostgreSQL
        # adds a second "_like" (varchar_pattern_ops) index to every text column and
        # foreign key to a text id: six indexes no query uses (nothing filters these with
        # a case-sensitive LIKE), each written on every INSERT and on every UPDATE that
        # changes an indexed column (each transition). Migration 0006 keeps the existing
        # indexes under these names and drops only the "_like" ones.
        indexes = [
            models.Index(fields=["next_action", "next_poll_at"], name="task_due"),
            # With the deadline: the sweep's search for overdue tasks reads only them
            # (migration 0007); it leads with the state, so searches by state use it too.
            models.Index(fields=["state", "deadline_at"], name="task_state_deadline"),
            models.Index(fields=["context_id"], name="task_context"),
            models.Index(fields=["remote_task_id"], name="task_remote_task"),
            models.Index(fields=["skill"], name="task_skill"),
            models.Index(fields=["agent"], name="task_agent"),
            models.Index(fields=["created_by_agent"], name="task_created_by_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.skill_id}→{self.agent_id} {self.state}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_interrupted(self) -> bool:
        return self.state in INTERRUPTED_STATES

    # --- state machine ---------------------------------------------------------------

    def transition(
        self,
        to_state: str,
        reason: str = "",
        *,
        leave_terminal: bool = False,
        if_deadline_at: datetime | None = None,
        **fields: Any,
    ) -> bool:
        """Move to ``to_state`` if nobody moved the task since it was read.

        A compare-and-set on the current state: returns False (and reloads) when another
        process changed the state first. ``if_deadline_at``: also only while the deadline
        is still this one (a timeout: a task started again meanwhile, in the same state,
        has a new deadline). Raises :class:`InvalidTransition` from a terminal state unless
        ``leave_terminal`` (only a person's retry does that). Records a :class:`TaskEvent`
        and, after commit, sends :data:`a2a.signals.task_changed`.
        """
        if self.is_terminal and not leave_terminal:
            raise InvalidTransition(
                f"Task {self.id} is {self.state}, a final state; it cannot become {to_state}."
            )
        now = timezone.now()
        updates = {"state": to_state, "state_changed_at": now, "updated_at": now, **fields}
        # A status's message belongs to that status (A2A's TaskStatus): a new state keeps
        # only the message reported with it, so a client is not shown the question again
        # once it was answered, or a progress note on the finished task.
        updates.setdefault("status_message", None)
        if to_state in TERMINAL_STATES or to_state in INTERRUPTED_STATES:
            updates.setdefault("next_action", NextAction.NONE)
            updates.setdefault("next_poll_at", None)
            updates.setdefault("lease_until", None)
        from_state = self.state
        read: dict[str, Any] = {"state": from_state}
        if if_deadline_at is not None:
            read["deadline_at"] = if_deadline_at
        event = TaskEvent(
            task_id=self.pk, at=now, from_state=from_state, to_state=to_state, reason=reason[:2000]
        )
        # On PostgreSQL: one statement, the event inserted only if the compare-and-set
        # changed the row (see platform_site.combined). Inside a caller's transaction (a
        # push's, under the row lock) it joins it, with no savepoint: nothing catches a
        # transition's database error to carry on in the same transaction, so a savepoint
        # would only cost two round trips and a subtransaction per transition.
        # The UPDATE answers the row's ``watched`` as it wrote it (after any concurrent
        # push config or gateway hand-over committed), for the receivers.
        written = combined.update_then_insert(
            Task, self.pk, read, updates, event, returning="watched", joining=True
        )
        if written is not None:
            return self._moved(written, updates, from_state)
        with transaction.atomic(savepoint=False):
            written = update_row_returning(Task, self.pk, read, updates, returning="watched")
            if written is None:  # a value only the ORM can write (the agent, on a reassign)
                changed = Task.objects.filter(pk=self.pk, **read).update(**updates)
                written = [None] * changed  # whether it is watched is not known: look
            if written:
                insert_rows([event])
            return self._moved(written, updates, from_state)

    def _moved(self, written: list[Any], updates: dict[str, Any], from_state: str) -> bool:
        """After a transition's write (``written``: the row's ``watched`` as the UPDATE
        returned it, None for not known; empty when the row did not change): take on its
        fields and announce it after commit, or reload the task another process moved
        first."""
        if not written:
            self.refresh_from_db()
            return False
        with self.lease_guard():
            for name, value in updates.items():
                setattr(self, name, value)
        to_state = updates["state"]
        watched = None if written[0] is None else bool(written[0])
        if watched is not None:
            self.watched = watched
        transaction.on_commit(
            lambda: task_changed.send(
                Task,
                task_id=self.pk,
                state=to_state,
                task=self,
                from_state=from_state,
                watched=watched,
            )
        )
        return True

    @classmethod
    def watch(cls, pk: Any) -> None:
        """Something outside the task's row follows it from now on (a push-notification
        config, a stream's subscriber in another process): its receivers look after every
        transition. Takes the row's lock until the caller's transaction ends, so a
        transition waits for it and returns it."""
        cls.objects.filter(pk=pk).update(watched=True)

    def start_work(self, reason: str = "", **fields: Any) -> bool:
        return self.transition(TaskState.WORKING, reason or "agent is working", **fields)

    def require_input(
        self, question: dict[str, Any] | None, *, auth: bool = False, **fields: Any
    ) -> bool:
        state = TaskState.AUTH_REQUIRED if auth else TaskState.INPUT_REQUIRED
        return self.transition(state, "agent asked a question", question=question, **fields)

    def complete(self, output: Any, artifacts: list[Any], **fields: Any) -> bool:
        return self.transition(
            TaskState.COMPLETED,
            "agent completed; output valid",
            output=output,
            artifacts=artifacts,
            question=None,
            **fields,
        )

    def fail(self, code: str, message: str, details: Any = None, **fields: Any) -> bool:
        error = {"code": code, "message": message, "details": details}
        return self.transition(TaskState.FAILED, message, error=error, question=None, **fields)

    def reject(self, message: str, **fields: Any) -> bool:
        error = {"code": "rejected", "message": message, "details": None}
        return self.transition(TaskState.REJECTED, message, error=error, question=None, **fields)

    def cancel(self, reason: str = "canceled", **fields: Any) -> bool:
        return self.transition(TaskState.CANCELED, reason, question=None, **fields)

    def resubmit(self, reason: str, **fields: Any) -> bool:
        """A person's retry: the one sanctioned way out of FAILED / REJECTED; a fresh
        attempt over A2A, sent at once."""
        if self.state not in RETRYABLE_STATES:
            raise InvalidTransition(
                f"Only failed or rejected tasks can be retried; task {self.id} is {self.state}."
            )
        return self._fresh_attempt(reason, **fields)

    def reassign(self, agent: AgentProfile, reason: str, **fields: Any) -> bool:
        """Give the task to another agent: a fresh attempt over A2A, sent at once. From a
        waiting state (submitted, working, offline, waiting for input) or FAILED/REJECTED."""
        if self.is_terminal and self.state not in RETRYABLE_STATES:
            raise InvalidTransition(
                f"Task {self.id} is {self.state}; only waiting, offline or failed tasks "
                "can be reassigned."
            )
        return self._fresh_attempt(reason, agent=agent, **fields)

    def back_to_http(self, **fields: Any) -> bool:
        """An offline task whose agent answers over HTTP again: over A2A once more, sent
        at once (same state, same attempt and message). Only while it is still offline in
        the state the caller saw; ``fields`` (its metadata) ride along. No state changes,
        so no event: ``metadata.fallbacks`` records the way back."""
        return self._set(
            {"state": self.state, "transport": Transport.OFFLINE},
            {
                "transport": Transport.A2A,
                "next_action": NextAction.SEND,
                "next_poll_at": timezone.now(),
                "lease_until": None,
                "poll_interval": 0.0,
                **fields,
            },
        )

    def _fresh_attempt(self, reason: str, **fields: Any) -> bool:
        """SUBMITTED again, to be sent at once, with nothing left of the agent's old task
        or its results (``fields`` add to or override that)."""
        fresh = {
            "transport": Transport.A2A,
            "next_action": NextAction.SEND,
            "next_poll_at": timezone.now(),
            "lease_until": None,
            "poll_interval": 0.0,
            "remote_task_id": "",
            "output": None,
            "artifacts": [],
            "error": None,
            "question": None,
            "status_message": None,
        }
        fresh["push_offset"] = self.fresh_push_offset(fields.get("attempts", self.attempts))
        return self.transition(
            TaskState.SUBMITTED, reason, leave_terminal=self.is_terminal, **{**fresh, **fields}
        )


class TaskEvent(models.Model):
    """One state transition of a task: when, from, to and why."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now)
    from_state = models.CharField(max_length=32, blank=True)
    to_state = models.CharField(max_length=32)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.from_state}→{self.to_state}"


class Direction(models.TextChoices):
    TO_AGENT = "to_agent", "Platform → agent"
    FROM_AGENT = "from_agent", "Agent → platform"


class TaskMessage(models.Model):
    """One A2A Message of a task's conversation, in either direction."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="messages")
    direction = models.CharField(max_length=16, choices=Direction.choices)
    message_id = models.CharField(max_length=200, blank=True)
    message = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.direction} {self.message_id}"


# Models defined in their own modules, imported here so Django registers them with the app
# (import them from those modules).
import a2a.listing_models  # noqa: E402
import a2a.pause_models  # noqa: E402
import a2a.push_models  # noqa: E402, F401
