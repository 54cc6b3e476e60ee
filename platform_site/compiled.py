"""The hot paths' reads below the ORM's per-query compilation.

Django compiles every queryset into SQL on every evaluation. For a wide row such as a
platform task (about 35 columns) that compilation costs three quarters of the read: a
``Task.objects.get(pk=...)`` took 1.5 ms of CPU on PostgreSQL here, and the same SELECT,
compiled once and executed with new parameters, 0.4 ms. The few reads that run several
times per task (the push webhook's, a worker's claim, a caller's token) use
:class:`CompiledGet` instead.

The SQL is the ORM's own (compiled lazily, once per process and database vendor), and the
row goes through the ORM's converters and ``Model.from_db``, so the instance is the one
``get()`` would return: same field values and types, ``_state.db`` set, nothing deferred.
The writes made the same way are in :mod:`platform_site.compiled_writes`.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.query import get_related_populators

M = TypeVar("M", bound=models.Model)


def _sample(field: Any) -> Any:
    """Any value of the field's type: only the SQL (with its one placeholder) is kept."""
    if field.is_relation:
        return _sample(field.target_field)
    if isinstance(field, models.UUIDField):
        return uuid.uuid4()
    if isinstance(field, models.IntegerField):
        return 0
    return "x"


@dataclass(frozen=True)
class _Read:
    """One compiled read: its SQL, the columns' converters, the model's columns (a slice
    of the row) and the populators of the related rows it joins."""

    sql: str
    converters: dict[int, Any]
    attnames: list[str]
    start: int
    end: int
    related: list[Any]


class CompiledGet(Generic[M]):
    """``model.objects.get(<field>=value)`` for a unique ``field``, compiled once; or, with
    :meth:`all`, ``model.objects.filter(<field>=value).order_by(*order_by)``.

    ``related``: ``select_related(*related)``, the rows of those foreign keys read in the
    same statement and set on the instance as the ORM sets them (one round trip and one
    statement instead of one per row).

    ``get(value, lock=True)`` reads under the row's lock on PostgreSQL (``FOR UPDATE``;
    call it inside a transaction); elsewhere the lock is the transaction's own. A read
    with ``related`` takes no lock (it would lock the joined rows too).
    """

    def __init__(
        self,
        model: type[M],
        field: str = "pk",
        related: tuple[str, ...] = (),
        order_by: tuple[str, ...] = (),
    ) -> None:
        self.model = model
        self.field = model._meta.pk if field == "pk" else model._meta.get_field(field)
        self.related = related
        self.order_by = order_by
        self._compiled: dict[tuple[str, str], _Read] = {}
        self._lock = threading.Lock()

    def _compile(self, connection: BaseDatabaseWrapper, using: str) -> _Read:
        found = self._compiled.get((connection.vendor, using))
        if found is not None:
            return found
        rows = self.model._default_manager.filter(**{self.field.name: _sample(self.field)})
        if self.related:
            rows = rows.select_related(*self.related)
        if self.order_by:
            rows = rows.order_by(*self.order_by)
        query = rows.query
        if not self.order_by:
            query.clear_ordering(force=True)
        compiler = query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        if len(params) != 1:  # a custom lookup or field; the ORM's read is the safe one
            raise ValueError(f"cannot compile a read of {self.model.__name__}.{self.field}")
        expressions = [selected[0] for selected in compiler.select]
        # What ModelIterable does with a compiled query's row, worked out once.
        fields = compiler.klass_info["select_fields"]
        start, end = fields[0], fields[-1] + 1
        read = _Read(
            sql=sql,
            converters=compiler.get_converters(expressions),
            attnames=[expression.target.attname for expression in expressions[start:end]],
            start=start,
            end=end,
            related=get_related_populators(compiler.klass_info, compiler.select, using),
        )
        with self._lock:
            self._compiled[(connection.vendor, using)] = read
        return read

    def get(self, value: Any, *, lock: bool = False, using: str = DEFAULT_DB_ALIAS) -> M | None:
        """The row whose field equals ``value``, or None."""
        connection = connections[using]
        read = self._compile(connection, using)
        sql = read.sql
        if lock and self.related:
            raise ValueError("a read with related rows takes no row lock")
        if lock and connection.vendor == "postgresql":
            sql += " FOR UPDATE"
        param = self.field.get_db_prep_value(self.field.to_python(value), connection)
        with connection.cursor() as cursor:
            cursor.execute(sql, [param])
            row = cursor.fetchone()
        if row is None:
            return None
        return self._instance(read, row, connection, using)

    def get_after(
        self, value: Any, statement: str, params: list[Any], *, using: str = DEFAULT_DB_ALIAS
    ) -> M | None:
        """On PostgreSQL: run ``statement`` (an UPDATE without RETURNING) and, in the same
        statement, read the row whose field equals ``value`` if ``statement`` changed a row;
        else None. One round trip instead of two. The read sees the row as it was before
        ``statement`` (one snapshot for the whole statement): the caller sets what that
        changed on the instance."""
        connection = connections[using]
        if connection.vendor != "postgresql":
            raise ValueError("a read after a write in one statement needs PostgreSQL")
        read = self._compile(connection, using)
        sql = f"WITH done AS ({statement} RETURNING 1) {read.sql} AND EXISTS (SELECT FROM done)"
        param = self.field.get_db_prep_value(self.field.to_python(value), connection)
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, param])
            row = cursor.fetchone()
        if row is None:
            return None
        return self._instance(read, row, connection, using)

    def many_after(
        self, statement: str, params: list[Any], *, using: str = DEFAULT_DB_ALIAS
    ) -> list[M]:
        """On PostgreSQL, for a unique ``field``: run ``statement`` (an UPDATE without
        RETURNING) and, in the same statement, read the rows it changed; their order is not
        given. As :meth:`get_after`, the read sees the rows as they were before it."""
        connection = connections[using]
        if connection.vendor != "postgresql":
            raise ValueError("a read after a write in one statement needs PostgreSQL")
        read = self._compile(connection, using)
        if not read.sql.endswith(" = %s"):  # the ORM's `field = value`, last
            raise ValueError(f"cannot read many of {self.model.__name__} by {self.field}")
        column = connection.ops.quote_name(self.field.column)
        sql = (
            f"WITH done AS ({statement} RETURNING {column}) {read.sql[: -len(' = %s')]} "
            f"IN (SELECT {column} FROM done)"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchall()
        return [self._instance(read, row, connection, using) for row in found]

    def all(self, value: Any, *, using: str = DEFAULT_DB_ALIAS) -> list[M]:
        """Every row whose field equals ``value``, in ``order_by`` order."""
        connection = connections[using]
        read = self._compile(connection, using)
        param = self.field.get_db_prep_value(self.field.to_python(value), connection)
        with connection.cursor() as cursor:
            cursor.execute(read.sql, [param])
            found = cursor.fetchall()
        return [self._instance(read, row, connection, using) for row in found]

    def _instance(self, read: _Read, row: Any, connection: BaseDatabaseWrapper, using: str) -> M:
        values = list(row)
        for index, (functions, expression) in read.converters.items():
            for convert in functions:
                values[index] = convert(values[index], expression, connection)
        obj = self.model.from_db(using, read.attnames, values[read.start : read.end])
        for populator in read.related:
            populator.populate(values, obj)
        return obj
