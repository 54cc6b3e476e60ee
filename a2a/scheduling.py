"""The scheduling verbs of :class:`~a2a.models.Task`: what a worker does next, and when.

``next_action``, ``next_poll_at``, ``lease_until``, ``transport`` and ``poll_interval``
change only through these methods (the claims' in :mod:`a2a.claims`, the state verbs in
``a2a.models``), never through ``update()`` calls elsewhere. Each verb is one conditional
UPDATE; the ones that take the state the caller saw return False when somebody (a
person's cancel, another worker) moved the task first, so the other change wins.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a.claims import TaskClaims
from a2a.pause_models import AgentPause
from a2a.states import NextAction, Transport
from platform_site.compiled_writes import update_rows
from platform_site.env import FLOAT_MAX

if TYPE_CHECKING:
    from a2a.models import Task

SCHEDULING_FIELDS = frozenset(
    {"next_action", "next_poll_at", "lease_until", "transport", "poll_interval"}
)


def task_seconds(agent_timeout: float | None) -> float:
    """A task's time to its deadline: its agent's ``timeoutMs`` (``AgentProfile.timeout``)
    when set, else ``A2A_TASK_TIMEOUT``. The one rule for every deadline (creation, a
    reply, a retry, a delivery at the gateway), so the timeout enforced is the one its
    message names (``a2a.agent_updates.task_timeout``)."""
    if agent_timeout and agent_timeout > 0:
        # An operator's "never" in the admin (1e12) put the deadline past the year 9999:
        # every creation for the agent was a 500. Bounded as the settings are.
        return min(float(agent_timeout), FLOAT_MAX)
    return float(settings.A2A_TASK_TIMEOUT)


class TaskScheduling(TaskClaims):
    """Mixed into :class:`~a2a.models.Task`."""

    # --- what comes next ------------------------------------------------------------

    def schedule(
        self,
        action: str,
        delay: float = 0.0,
        *,
        if_state: str | None = None,
        if_due: tuple[str, ...] = (),
        **fields: Any,
    ) -> bool:
        """Do ``action`` in ``delay`` seconds (releasing any lease); other fields ride along.

        With ``if_state``, only while the task is still in that state; with ``if_due``, only
        while the action due is one of those.
        """
        due = timezone.now() + timedelta(seconds=delay)
        conditions: dict[str, Any] = {"state": if_state} if if_state is not None else {}
        if if_due:
            conditions["next_action__in"] = if_due
        return self._set(
            conditions, {"next_action": action, "next_poll_at": due, "lease_until": None, **fields}
        )

    def schedule_poll(
        self, delay: float, interval: float, *, polled: bool = False, **fields: Any
    ) -> bool:
        """Poll again in ``delay`` s, remembering the backoff ``interval``; only in the
        state the worker saw. ``polled``: after a poll's answer, only while no other action
        was queued meanwhile (the poll's own, or none since the answer's transition): a
        person's reply to the question the task was polled in stands, whoever holds its
        send. Other fields ride along."""
        if_due = (NextAction.POLL, NextAction.NONE) if polled else ()
        return self.schedule(
            NextAction.POLL,
            delay,
            if_state=self.state,
            if_due=if_due,
            poll_interval=interval,
            **fields,
        )

    def reset_polling(self) -> None:
        """The next poll starts from the base interval again (a reply, a retry)."""
        self._set({}, {"poll_interval": 0.0})

    def cancel_propagated(self, **fields: Any) -> bool:
        """The agent was told about a cancel (or could not be): nothing more to do."""
        return self._set(
            {"next_action": NextAction.CANCEL},
            {"next_action": NextAction.NONE, "next_poll_at": None, "lease_until": None, **fields},
        )

    def stop_following(self) -> bool:
        """Nothing for the A2A worker to do (the gateway carries the task)."""
        return self._set(
            {"transport": self.transport},
            {"next_action": NextAction.NONE, "next_poll_at": None, "lease_until": None},
        )

    def mark_sent(self) -> bool:
        """The agent has the task's message (a stream's first event named its task) while
        this worker still holds the claim: should the worker die, the task is picked up by
        following it (a subscribe) when the claim runs out, not by sending the message
        again, which an agent that does not deduplicate would run twice. Only while the
        action is still the send (a person's cancel meanwhile stands) of the agent task
        named (a reassign or retry meanwhile, due to be sent too, follows none yet)."""
        return self._set(
            {"next_action": NextAction.SEND, "remote_task_id": self.remote_task_id},
            {"next_action": NextAction.FOLLOW},
        )

    # --- attempts and the push webhook's serial --------------------------------------

    @property
    def push_serial(self) -> int:
        """The number in the push webhook's address and token (:mod:`a2a.agent_push_tokens`):
        one more at every attempt sent (``attempts``) and at every fresh attempt (a retry,
        a reassign: ``push_offset``), never back. A fresh attempt leaves ``attempts`` as it
        is (a retry) or counts it from 0 again (a reassign), so the attempt alone let an old
        attempt's agent task push to the new one with its old token: after a retry until
        the new send, after a reassign away and back for good. Of a task never retried nor
        reassigned since ``push_offset`` came it is the attempt, as the address was before,
        so the webhooks given out then stay valid."""
        return max(1, int(self.attempts or 0) + int(self.push_offset or 0))

    def fresh_push_offset(self, attempts: int) -> int:
        """The ``push_offset`` of a fresh attempt that sets ``attempts``: its serial one
        more than the task's now (:meth:`a2a.models.Task._fresh_attempt`), so the webhook
        of every attempt before is refused from the moment it commits."""
        return self.push_serial + 1 - attempts

    def count_attempt(self, **fields: Any) -> bool:
        """A first message is being sent: one attempt more (and so one more serial of the
        push webhook), other fields (its metadata) riding along. Only while neither a fresh
        attempt (``push_offset``) nor another send (``attempts``) came since the task was
        read: the send of an attempt a person retried or reassigned meanwhile, or of a
        worker whose claim ran out and was taken over, records nothing and is not made
        (:func:`a2a.agent_calls._start_attempt`): no serial is taken back or given twice.
        False then."""
        read = {"push_offset": int(self.push_offset or 0), "attempts": self.attempts}
        return self._set(read, {"attempts": self.attempts + 1, **fields})

    def drop_action(self) -> None:
        """Give up the pending action (nothing is due any more)."""
        self._set({}, {"next_action": NextAction.NONE, "next_poll_at": None, "lease_until": None})

    def defer(self, delay: float, **fields: Any) -> None:
        """Try the same action again in ``delay`` seconds (no send slot for the agent, an
        internal error).

        The claim ends now rather than being cleared: a task with no lease at all, never
        sent and due only just, is a new task the sweep leaves to its hint for
        ``A2A_HINT_GRACE`` (:meth:`claim_due`), but this task's hint was used up by the
        claim being let go, so it would wait ``delay`` plus that grace instead of ``delay``.
        """
        now = timezone.now()
        due = now + timedelta(seconds=delay)
        self._set({}, {"lease_until": now, "next_poll_at": due, **fields})

    # --- transports -----------------------------------------------------------------

    def hand_to_gateway(self, transport: str, **fields: Any) -> None:
        """The gateway carries the task from now on (``websocket`` or ``offline``); it is
        ``watched`` for good (the gateway withdraws its deliveries when it ends)."""
        self._set(
            {},
            {
                "transport": transport,
                "watched": True,
                "next_action": NextAction.NONE,
                "next_poll_at": None,
                "lease_until": None,
                **fields,
            },
        )

    @classmethod
    def gateway_connected(cls, pk: Any, *, still: Q | None = None) -> int:
        """An offline task (or a list of them) reached its agent's socket; how many.

        Its deadline starts now, in the same UPDATE: the one set before (at creation, at
        the reply) passed while it waited offline, which ``OFFLINE_TASK_TTL`` governs, and
        the agent would have had its task failed ``timeout`` a second after it got it.
        ``still``: the caller's condition, in the same statement (see
        :func:`gateway.offline.relabel_delivered`)."""
        rows = cls._rows().filter(transport=Transport.OFFLINE)
        rows = rows.filter(pk__in=pk) if isinstance(pk, list | tuple | set) else rows.filter(pk=pk)
        if still is not None:
            rows = rows.filter(still)
        now = timezone.now()
        moved = 0
        # One UPDATE per agent timeout among the tasks (nearly always one): each row's
        # deadline follows its agent's ``timeoutMs``.
        for timeout in set(rows.values_list("agent__timeout", flat=True)):
            if timeout is None:
                some = rows.filter(agent__timeout__isnull=True)
            else:
                some = rows.filter(agent__timeout=timeout)
            deadline = now + timedelta(seconds=task_seconds(timeout))
            moved += some.update(
                transport=Transport.WEBSOCKET, deadline_at=deadline, updated_at=now
            )
        return moved

    @classmethod
    def gateway_undelivered(cls, still: Any) -> int:
        """Tasks labelled ``websocket`` whose assignment no connection took, their agent
        gone: ``offline``, as they are (see :func:`gateway.offline.relabel_undelivered`).
        ``still``: the gateway's condition, in the same statement, that the assignment is
        still waiting (a connection that takes it meanwhile labels the task again)."""
        rows = cls._rows().filter(still, transport=Transport.WEBSOCKET)
        return int(rows.update(transport=Transport.OFFLINE, updated_at=timezone.now()))

    def poll_soon(self, *, over_send: bool = True) -> bool:
        """Poll now (a push said COMPLETED without its output) — unless a worker holds the
        task: its poll reads the same agent task. Only in the state the caller saw, never
        over a cancel waiting to go, and (``over_send`` False) not over a send either: a
        push that does not prove the agent has the message leaves a person's reply in its
        retry backoff as it is."""
        now = timezone.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        rows = self._rows().filter(free, pk=self.pk, state=self.state)
        kept = (NextAction.CANCEL,) if over_send else (NextAction.CANCEL, NextAction.SEND)
        rows = rows.exclude(next_action__in=kept)
        fields = {"next_action": NextAction.POLL, "next_poll_at": now, "updated_at": now}
        if not rows.update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        return True

    # --- many at once (the batched poll engine, a2a.engine) -------------------------

    @classmethod
    def poll_later(cls, rows: list[tuple[Task, datetime, float]], lease: Any) -> int:
        """Re-schedule many polls, each ``(task, due, interval)``, releasing their claim,
        in one round trip. A task counts only if it is still in the state
        its worker saw and still held under ``lease`` (the batch's claim): a person's
        cancel meanwhile, or a claim that ran out and was taken by another worker, wins.
        Returns how many were re-scheduled. The updates go as one ``executemany``
        (:func:`~platform_site.compiled_writes.update_rows`); ``bulk_update``'s ``CASE`` cost a
        third of a polling worker's CPU."""
        fields = ("next_action", "next_poll_at", "poll_interval", "lease_until")
        updates = []
        # In the key's order, as every statement that locks many of these rows does
        # (pause_polls): two transactions taking the same rows in opposite orders deadlock.
        for task, due, interval in sorted(rows, key=lambda row: str(row[0].pk)):
            values = dict(zip(fields, (NextAction.POLL, due, interval, None), strict=True))
            updates.append((task.pk, {"state": task.state, "lease_until": lease}, values))
        with transaction.atomic():
            updated = update_rows(cls, updates)  # type: ignore[arg-type]
        if updated is None:
            raise TypeError(f"a batch's lease is a datetime, not {lease!r}")
        for task, due, interval in rows:
            task.next_action, task.next_poll_at, task.poll_interval = NextAction.POLL, due, interval
            task.lease_until = None
        return int(updated)

    @classmethod
    def pause_polls(cls, agent_id: str, until: datetime) -> int:
        """The agent asked for a pause (``Retry-After``): no poll of its tasks before
        ``until``, whichever worker would do it (nor a send: :mod:`a2a.agent_pauses`).

        A task another worker holds locked right now (re-scheduling its poll: its row's
        ``next_poll_at`` is being written) is passed over: one UPDATE of all the agent's
        tasks waited for it in scan order while that worker went on to rows the UPDATE
        held, and PostgreSQL killed one of them (deadlock detected, on a busy agent that
        answers 429). The rows are locked in the key's order, skipping held ones; the one
        passed over is polled when its worker said, and a 429 then pauses it too.

        The pause itself is kept for the agent (:class:`~a2a.pause_models.AgentPause`):
        a poll re-scheduled after this by a worker that read the task before (the rest of
        a batch) still waits for it."""
        AgentPause.ask(agent_id, until)
        pending = cls._rows().filter(
            agent_id=agent_id, next_action=NextAction.POLL, next_poll_at__lt=until
        )
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # One statement, the ids kept on the server (an agent may have more due
                # polls than a statement takes parameters: 65,535).
                held = pending.select_for_update(skip_locked=True).order_by("pk").values("pk")
                pending = pending.filter(pk__in=held)
            return int(pending.update(next_poll_at=until, updated_at=timezone.now()))

    @classmethod
    def poll_agent_soon(cls, agent_id: str) -> int:
        """The agent's tasks can no longer be followed by listing: their polls, spaced out
        while the listing told the platform first, are due now (unless a worker holds one)."""
        now = timezone.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        rows = cls._rows().filter(
            free, agent_id=agent_id, next_action=NextAction.POLL, next_poll_at__gt=now
        )
        return int(rows.update(next_poll_at=now, updated_at=now))

    @classmethod
    def follow_again_now(cls, agent_id: str, error_code: str) -> list[Any]:
        """The agent's tasks followed over A2A (a poll or a subscribe due) whose last read
        failed with ``error_code`` are due now, their backoff from the start again (unless
        a worker holds one: its call goes on); their ids. For a new credential after
        ``agent_auth_failed``: the next read uses it at once, not after the backoff."""
        now = timezone.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        rows = cls._rows().filter(
            free,
            agent_id=agent_id,
            transport=Transport.A2A,
            next_action__in=(NextAction.POLL, NextAction.FOLLOW),
            error__code=error_code,
        )
        ids = list(rows.values_list("pk", flat=True))
        if ids:
            rows.update(next_poll_at=now, poll_interval=0.0, updated_at=now)
        return ids

    def note(self, *, if_state: str | None = None, **fields: Any) -> bool:
        """Store non-scheduling fields (error, metadata, attempts) without a transition."""
        if SCHEDULING_FIELDS & set(fields) or "state" in fields or "push_offset" in fields:
            raise ValueError("scheduling fields and the state change only through their verbs")
        conditions = {"state": if_state} if if_state is not None else {}
        return self._set(conditions, fields)
