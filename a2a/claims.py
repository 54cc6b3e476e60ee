"""The claim verbs of :class:`~a2a.models.Task`: which worker acts on a task, until when.

A worker claims a due task by writing its lease (``lease_until``) in one conditional
UPDATE; nobody else acts on the task until the lease runs out or the worker lets it go.
A killed worker's lease runs out and a later sweep claims the task again: work is
delayed, never lost, never done twice at once. What is due next is
:mod:`a2a.scheduling`'s.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a.states import NextAction
from platform_site.compiled_writes import update_row

if TYPE_CHECKING:
    from a2a.models import Task


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


class TaskClaims:
    """Mixed into :class:`~a2a.models.Task` (through :class:`~a2a.scheduling.TaskScheduling`)."""

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
            with self.lease_guard():
                for name, value in fields.items():
                    setattr(self, name, value)
        return bool(updated)

    def lease_guard(self) -> AbstractContextManager[Any]:
        """Held while this object takes on what a write of its row set: its claim may be
        renewed meanwhile by another thread (:mod:`a2a.lease_keeper`), which takes the
        renewed lease on only under the same guard and only if the object still shows
        the lease it renewed, so the object never shows a claim its row has lost."""
        guard = self.__dict__.get("_lease_guard")
        return guard if guard is not None else nullcontext()

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        with self.lease_guard():
            super().refresh_from_db(*args, **kwargs)  # type: ignore[misc]

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

    def renew_lease(self, held: datetime, seconds: float) -> bool:
        """Keep a long call's claim ``seconds`` longer, only while it is still the one
        this worker wrote (``held``): a claim that moved on (a schedule, a release,
        another worker's claim) stands. Whether it was renewed. The task's ``updated_at``
        stays: nothing about the task changed."""
        lease = timezone.now() + timedelta(seconds=seconds)
        if not self._rows().filter(pk=self.pk, lease_until=held).update(lease_until=lease):
            return False
        with self.lease_guard():
            # Not if the worker wrote the row (and this object) after this UPDATE: what
            # it wrote (a schedule, a transition) stands, and the object shows it.
            if self.lease_until == held:
                self.lease_until = lease
        return True

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
