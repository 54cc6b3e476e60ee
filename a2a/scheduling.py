"""The scheduling verbs of :class:`~a2a.models.Task`: what a worker does next, and when.

``next_action``, ``next_poll_at``, ``lease_until``, ``transport`` and ``poll_interval``
change only through these methods (and the state verbs in ``a2a.models``), never through
``update()`` calls elsewhere. Each verb is one conditional UPDATE; the ones that take the
state the caller saw return False when somebody (a person's cancel, another worker) moved
the task first, so the other change wins.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a.states import NextAction, Transport
from platform_site.compiled_writes import update_row, update_rows

if TYPE_CHECKING:
    from a2a.models import Task

SCHEDULING_FIELDS = frozenset(
    {"next_action", "next_poll_at", "lease_until", "transport", "poll_interval"}
)


def lease_seconds() -> float:
    """A claim's lease: the setting, but never shorter than one agent call can take."""
    call = settings.A2A_HTTP_TIMEOUT + settings.A2A_CONNECT_TIMEOUT + 2.0
    return max(settings.A2A_LEASE_SECONDS, call)


def due_filter(now: Any) -> Q:
    return (
        ~Q(next_action=NextAction.NONE)
        & Q(next_poll_at__lte=now)
        & (Q(lease_until__isnull=True) | Q(lease_until__lt=now))
    )


class TaskScheduling:
    """Mixed into :class:`~a2a.models.Task`."""

    pk: Any
    state: str
    next_action: str
    next_poll_at: Any
    lease_until: Any
    transport: str
    poll_interval: float

    @classmethod
    def _rows(cls) -> Any:
        return cls.objects  # type: ignore[attr-defined]

    def _set(self, conditions: dict[str, Any], fields: dict[str, Any]) -> bool:
        fields = {**fields, "updated_at": timezone.now()}
        updated = update_row(type(self), self.pk, conditions, fields)  # type: ignore[arg-type]
        if updated is None:
            updated = self._rows().filter(pk=self.pk, **conditions).update(**fields)
        if updated:
            for name, value in fields.items():
                setattr(self, name, value)
        return bool(updated)

    # --- claims --------------------------------------------------------------------

    @classmethod
    def claim(cls, pk: Any) -> Task | None:
        """Claim one task if it is due and nobody holds it; None otherwise."""
        from a2a import rows  # a2a.rows imports the Task model, which imports this module

        now = timezone.now()
        lease = now + timedelta(seconds=lease_seconds())
        if connection.vendor == "postgresql":
            # The claim and the read in one statement; the read sees the row as it was
            # before the claim, whose one change is the lease.
            task = rows.TASKS_FOR_WORK.get_after(pk, *cls._claim_sql(pk, now, lease))
            if task is not None:
                task.lease_until = lease
            return task
        if not cls._claim_row(pk, now, lease):
            return None
        return cls._claimed(pk)

    @classmethod
    def claim_many(cls, pks: list[Any]) -> list[Task]:
        """Claim those of these tasks that are due and nobody holds, in one statement, and
        read them with their agents and skills (on PostgreSQL in the same statement); in
        no given order. A worker's batch of hints costs one round trip, not one each."""
        from a2a import rows  # a2a.rows imports the Task model, which imports this module

        if not pks:
            return []
        now = timezone.now()
        lease = now + timedelta(seconds=lease_seconds())
        sql, params = cls._claim_sql(pks, now, lease)
        if connection.vendor == "postgresql":
            tasks = rows.TASKS_FOR_WORK.many_after(sql, params)
        else:
            pk = connection.ops.quote_name(cls._meta.pk.column)  # type: ignore[attr-defined]
            with connection.cursor() as cursor:
                cursor.execute(f"{sql} RETURNING {pk}", params)
                claimed = [row[0] for row in cursor.fetchall()]
            tasks = [t for t in map(rows.task_for_work, claimed) if t is not None]
        for task in tasks:
            task.lease_until = lease
        return tasks

    @classmethod
    def _claim_row(cls, pk: Any, now: datetime, lease: datetime) -> int:
        """Run the claim's UPDATE alone; the rows it changed (0 or 1)."""
        sql, params = cls._claim_sql(pk, now, lease)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return int(cursor.rowcount)

    @classmethod
    def _claim_sql(cls, pk: Any, now: datetime, lease: datetime) -> tuple[str, list[Any]]:
        """``filter(due_filter(now), pk=pk).update(lease_until=lease)`` as one plain
        statement: every new task and every hint runs it, and the ORM compiled it anew
        each time for more CPU than the UPDATE itself. ``pk`` a list: those rows (one
        statement's text for any number of them on PostgreSQL: ``= ANY``)."""
        meta = cls._meta  # type: ignore[attr-defined]
        qn = connection.ops.quote_name

        def column(name: str) -> str:
            return qn(meta.get_field(name).column)

        def prepared(name: str, value: Any) -> Any:
            field = meta.get_field(name)
            return field.get_db_prep_value(field.get_prep_value(value), connection)

        def key(value: Any) -> Any:
            return meta.pk.get_db_prep_value(meta.pk.to_python(value), connection)

        if not isinstance(pk, list):
            which, keys = "= %s", [key(pk)]
        elif connection.vendor == "postgresql":
            which, keys = "= ANY(%s)", [[key(value) for value in pk]]
        else:
            which, keys = f"IN ({', '.join(['%s'] * len(pk))})", [key(value) for value in pk]
        sql = (
            f"UPDATE {qn(meta.db_table)} SET {column('lease_until')} = %s "
            f"WHERE {qn(meta.pk.column)} {which} AND {column('next_action')} <> %s "
            f"AND {column('next_poll_at')} <= %s "
            f"AND ({column('lease_until')} IS NULL OR {column('lease_until')} < %s)"
        )
        at = prepared("next_poll_at", now)
        params = [
            prepared("lease_until", lease),
            *keys,
            NextAction.NONE.value,
            at,
            at,
        ]
        return sql, params

    @classmethod
    def claim_due(cls, limit: int, *, leave_new_for: float = 0.0, polls: bool = True) -> list[Any]:
        """Claim up to ``limit`` due tasks, oldest due first; returns their ids.

        ``leave_new_for``: a new task nobody has claimed yet is left alone for that many
        seconds after it became due. Its hint (a thread of this process, the workers'
        Redis list or a Celery message) starts it; the sweep is the safety net for a lost
        hint, and racing the hint would only add a claim, a read and a thread.
        ``polls``: False leaves due polls alone (the sweep's are the batched engine's,
        within each agent's rate).
        """
        now = timezone.now()
        lease = now + timedelta(seconds=lease_seconds())
        with transaction.atomic():
            rows = cls._rows().filter(due_filter(now)).order_by("next_poll_at")
            if not polls:
                rows = rows.exclude(next_action=NextAction.POLL)
            if leave_new_for > 0:
                rows = rows.exclude(
                    next_action=NextAction.SEND,
                    attempts=0,
                    lease_until__isnull=True,
                    next_poll_at__gt=now - timedelta(seconds=leave_new_for),
                )
            if connection.vendor == "postgresql":
                rows = rows.select_for_update(skip_locked=True)
            ids = list(rows.values_list("pk", flat=True)[:limit])
            if ids:
                # Inside the transaction the rows are ours (row locks on PostgreSQL, the
                # write lock on SQLite); the due filter keeps the update a compare-and-set.
                cls._rows().filter(due_filter(now), pk__in=ids).update(lease_until=lease)
        return ids

    def claim_at_birth(self) -> None:
        """Claim a task not stored yet: its row goes in with the lease, for the process
        that creates it to start it with no claim of its own (a conditional UPDATE and a
        read per task: on SQLite about a third of the worker's CPU for an instant task).
        Nobody else can act on it before the lease runs out, as after any claim."""
        if self.next_action == NextAction.SEND and self.lease_until is None:
            self.lease_until = timezone.now() + timedelta(seconds=lease_seconds())

    def extend_lease(self, seconds: float) -> Any:
        """Keep the claim for a long call (a stream, a blocking send); the new lease."""
        lease = timezone.now() + timedelta(seconds=seconds)
        self._set({}, {"lease_until": lease})
        return lease

    @classmethod
    def take_over(cls, pk: Any, lease: str) -> Task | None:
        """Take a claim handed off with its ``lease`` (an ISO time); None if it changed."""
        try:
            held = datetime.fromisoformat(lease)
        except ValueError:
            return None
        fresh = timezone.now() + timedelta(seconds=lease_seconds())
        if not cls._rows().filter(pk=pk, lease_until=held).update(lease_until=max(held, fresh)):
            return None
        return cls._claimed(pk)

    @classmethod
    def _claimed(cls, pk: Any) -> Task:
        """A task this worker just claimed, with its agent and skill."""
        from a2a import rows  # a2a.rows imports the Task model, which imports this module

        task = rows.task_for_work(pk)
        if task is None:
            raise cls.DoesNotExist(f"Task {pk} vanished after its claim.")  # type: ignore[attr-defined]
        return task

    def release(self, *, held: datetime | None = None) -> bool:
        """Give up the claim without changing what is due. With ``held`` (the lease this
        worker took), only while the lease is still that one: a later claim by another
        worker, whose lease replaced it, stands. Whether the claim was given up."""
        return self._set({"lease_until": held} if held is not None else {}, {"lease_until": None})

    # --- what comes next ------------------------------------------------------------

    def schedule(
        self, action: str, delay: float = 0.0, *, if_state: str | None = None, **fields: Any
    ) -> bool:
        """Do ``action`` in ``delay`` seconds (releasing any lease); other fields ride along.

        With ``if_state``, only while the task is still in that state.
        """
        due = timezone.now() + timedelta(seconds=delay)
        conditions = {"state": if_state} if if_state is not None else {}
        return self._set(
            conditions, {"next_action": action, "next_poll_at": due, "lease_until": None, **fields}
        )

    def schedule_poll(self, delay: float, interval: float, **fields: Any) -> bool:
        """Poll again in ``delay`` s, remembering the backoff ``interval``; only in the
        state the worker saw. Other fields ride along."""
        return self.schedule(
            NextAction.POLL, delay, if_state=self.state, poll_interval=interval, **fields
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
        action is still the send (a person's cancel meanwhile stands)."""
        return self._set({"next_action": NextAction.SEND}, {"next_action": NextAction.FOLLOW})

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
    def gateway_connected(cls, pk: Any) -> bool:
        """An offline task (or a list of them) reached its agent's socket."""
        rows = cls._rows().filter(transport=Transport.OFFLINE)
        rows = rows.filter(pk__in=pk) if isinstance(pk, list | tuple | set) else rows.filter(pk=pk)
        return bool(rows.update(transport=Transport.WEBSOCKET, updated_at=timezone.now()))

    def poll_soon(self) -> bool:
        """Poll now (a push said COMPLETED without its output) — unless a worker holds the
        task: its poll reads the same agent task. Only in the state the caller saw."""
        now = timezone.now()
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
        rows = self._rows().filter(free, pk=self.pk, state=self.state)
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
        for task, due, interval in rows:
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
        ``until``, whichever worker would do it."""
        rows = cls._rows().filter(
            agent_id=agent_id, next_action=NextAction.POLL, next_poll_at__lt=until
        )
        return int(rows.update(next_poll_at=until, updated_at=timezone.now()))

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

    def note(self, *, if_state: str | None = None, **fields: Any) -> bool:
        """Store non-scheduling fields (error, metadata, attempts) without a transition."""
        if SCHEDULING_FIELDS & set(fields) or "state" in fields:
            raise ValueError("scheduling fields and the state change only through their verbs")
        conditions = {"state": if_state} if if_state is not None else {}
        return self._set(conditions, fields)
