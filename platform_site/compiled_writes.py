"""The hot paths' writes below the ORM's per-query compilation (the reads are in
:mod:`platform_site.compiled`).

:func:`update_row` is the conditional single-row UPDATE the task verbs are made of
(``filter(pk=..., state=...).update(...)``), written as one plain statement with the
fields' own database preparation; anything beyond plain values and equality is left to
the ORM. :func:`update_row_returning` answers a column of the row it wrote, and
:func:`update_rows` sends many at once (a batch of re-scheduled polls). :func:`insert_rows`
is ``bulk_create`` for new rows (a task, its first event and message, a transition's
event): one INSERT per batch, no database-numbered ids read back. The ORM's update
compiled anew cost three times the CPU of these.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.core.exceptions import FieldDoesNotExist
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper

M = TypeVar("M", bound=models.Model)


def update_row(
    model: type[models.Model], pk: Any, conditions: dict[str, Any], fields: dict[str, Any]
) -> int | None:
    """``model.objects.filter(pk=pk, **conditions).update(**fields)`` as one plain
    statement; returns the rows changed, or None when it cannot (a value that is an
    expression or a model instance, a condition that is not plain equality): the caller
    then uses the ORM. The ORM's update compiled anew cost three times the CPU.
    """
    return update_rows(model, [(pk, conditions, fields)])


def update_row_returning(
    model: type[models.Model],
    pk: Any,
    conditions: dict[str, Any],
    fields: dict[str, Any],
    returning: str,
) -> list[Any] | None:
    """:func:`update_row`, answering the column ``returning`` of the row as it was written
    (``[]`` when the row did not change); None, with nothing written, when it cannot be
    plain. One statement (``UPDATE ... RETURNING``) where a read after the write would be
    a second one, and would not be the row the write saw."""
    connection = connections[DEFAULT_DB_ALIAS]
    built = update_sql(connection, model, pk, conditions, fields)
    if built is None or not built[0]:
        return None
    sql, params = built
    column = connection.ops.quote_name(model._meta.get_field(returning).column)
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {column}", params)
        return [row[0] for row in cursor.fetchall()]


def update_rows(
    model: type[models.Model], updates: list[tuple[Any, dict[str, Any], dict[str, Any]]]
) -> int | None:
    """Many :func:`update_row` updates, each ``(pk, conditions, fields)``, sent together:
    the rows whose statements read the same go as one ``executemany`` (one round trip in
    psycopg's pipeline). Returns the rows changed in all, or None when one of them cannot
    be written plainly (nothing is written then). ``bulk_update`` builds a ``CASE`` per
    field and row; at a few hundred rows resolving it cost more than the HTTP calls the
    rows came from.
    """
    connection = connections[DEFAULT_DB_ALIAS]
    statements: dict[str, list[list[Any]]] = {}
    for pk, conditions, fields in updates:
        built = update_sql(connection, model, pk, conditions, fields)
        if built is None:
            return None
        sql, params = built
        if sql:
            statements.setdefault(sql, []).append(params)
    changed = 0
    with connection.cursor() as cursor:
        for sql, batch in statements.items():
            if len(batch) == 1:
                cursor.execute(sql, batch[0])
            else:
                cursor.executemany(sql, batch)
            changed += int(cursor.rowcount)
    return changed


_Plan = tuple[str, list[Any], list[Any]]
# (model, vendor, the fields set, the conditions' names and which are None) -> the UPDATE
# and the fields its parameters go through, or None when it cannot be plain. Working the
# statement out anew for every row was a third of its CPU.
_update_plans: dict[tuple[Any, ...], _Plan | None] = {}


def _update_plan(
    connection: BaseDatabaseWrapper, model: type[models.Model], key: tuple[Any, ...]
) -> _Plan | None:
    names, condition_shape = key[2], key[3]
    meta = model._meta
    qn = connection.ops.quote_name
    sets: list[str] = []
    set_fields: list[Any] = []
    for name in names:
        field = _field(meta, name)
        if field is None or not field.concrete or field.is_relation:
            return None
        sets.append(f"{qn(field.column)} = %s")
        set_fields.append(field)
    assert meta.pk is not None
    where = [f"{qn(meta.pk.column)} = %s"]
    where_fields: list[Any] = []
    for name, is_null in condition_shape:
        if "__" in name:  # a lookup other than equality
            return None
        field = _field(meta, name)
        if field is None or not field.concrete or field.is_relation:
            return None
        if is_null:
            where.append(f"{qn(field.column)} IS NULL")
            continue
        if field.get_internal_type() == "JSONField":
            return None  # JSON equality is not plain SQL equality
        where.append(f"{qn(field.column)} = %s")
        where_fields.append(field)
    sql = f"UPDATE {qn(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(where)}"
    return sql, set_fields, where_fields


def update_sql(
    connection: BaseDatabaseWrapper,
    model: type[models.Model],
    pk: Any,
    conditions: dict[str, Any],
    fields: dict[str, Any],
) -> tuple[str, list[Any]] | None:
    """The plain UPDATE of one row and its parameters; ``("", [])`` when there is nothing
    to set, None when a value or a condition is not plain."""
    if not fields:
        return "", []
    if any(_not_plain(value) for value in fields.values()) or any(
        _not_plain(value) for value in conditions.values()
    ):
        return None
    shape = tuple((name, value is None) for name, value in conditions.items())
    key = (model, connection.vendor, tuple(fields), shape)
    try:
        plan = _update_plans[key]
    except KeyError:
        plan = _update_plans[key] = _update_plan(connection, model, key)
    if plan is None:
        return None
    sql, set_fields, where_fields = plan
    params = [prep_save(f, v, connection) for f, v in zip(set_fields, fields.values(), strict=True)]
    pk_field = model._meta.pk
    assert pk_field is not None
    params.append(pk_field.get_db_prep_value(pk_field.to_python(pk), connection))
    values = [value for value in conditions.values() if value is not None]
    params += [prep_save(f, v, connection) for f, v in zip(where_fields, values, strict=True)]
    return sql, params


def prep_save(field: Any, value: Any, connection: BaseDatabaseWrapper) -> Any:
    """``field.get_db_prep_save(value, connection)``, with a short cut for what most
    datetime values are on SQLite, an aware datetime: Django prepares one through four
    calls and a settings lookup (half of a task UPDATE's CPU); here it is the same
    string, the time in the connection's zone without its offset."""
    if (
        type(value) is datetime
        and type(field) is models.DateTimeField
        and connection.vendor == "sqlite"
        and value.utcoffset() is not None
    ):
        zone = connection.timezone  # None when USE_TZ is off: Django's own error then
        if zone is not None:
            return str(value.astimezone(zone).replace(tzinfo=None))
    return field.get_db_prep_save(value, connection)


# (model, vendor, numbered) -> the fields an INSERT writes, its column list, one row's
# placeholders: working them out anew for every row cost more than running the INSERT.
_insert_plans: dict[tuple[type, str, bool], tuple[list[Any], str, str]] = {}


def insert_plan(
    model: type[models.Model], connection: BaseDatabaseWrapper, numbered: bool
) -> tuple[list[Any], str, str]:
    key = (model, connection.vendor, numbered)
    plan = _insert_plans.get(key)
    if plan is None:
        meta = model._meta
        qn = connection.ops.quote_name
        fields = [f for f in meta.concrete_fields if not (f.primary_key and numbered)]
        columns = ", ".join(qn(f.column) for f in fields)
        plan = (
            fields,
            f"INSERT INTO {qn(meta.db_table)} ({columns}) VALUES ",
            f"({', '.join(['%s'] * len(fields))})",
        )
        _insert_plans[key] = plan
    return plan


def insert_rows(objs: list[M]) -> None:
    """``bulk_create(objs)`` as plain INSERTs, for new rows of one model whose auto id
    nobody reads back: an auto primary key left unset stays None on the objects (the
    database numbers the rows). Each field is saved as ``save()`` would save it
    (``pre_save``, then its database preparation); no signals are sent, as with
    ``bulk_create``. Compiling the ORM's insert anew cost more than running it.
    """
    if not objs:
        return
    model = type(objs[0])
    numbered = objs[0].pk is None  # an auto id the database gives
    if any(type(obj) is not model or (obj.pk is None) != numbered for obj in objs):
        raise ValueError("insert_rows takes new rows of one model, all with ids or none")
    connection = connections[DEFAULT_DB_ALIAS]
    fields, insert, row = insert_plan(model, connection, numbered)
    if connection.vendor == "postgresql" and len(objs) > 1:
        # One statement per row, all sent at once (psycopg's executemany pipelines them):
        # psycopg converts and caches a statement's placeholders only up to 50 of them,
        # so a multi-row INSERT of a batch (100 tasks of 30 columns) was converted anew
        # every time: 0.17-0.20 against 0.12-0.13 ms of CPU per row, the server's the same.
        with connection.cursor() as cursor:
            cursor.executemany(
                insert + row,
                [[prep_save(f, f.pre_save(obj, True), connection) for f in fields] for obj in objs],
            )
        mark_saved(objs)
        return
    size = 1 if len(objs) == 1 else max(1, connection.ops.bulk_batch_size(fields, objs))
    with connection.cursor() as cursor:
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = [
                prep_save(f, f.pre_save(obj, True), connection) for obj in batch for f in fields
            ]
            cursor.execute(insert + ", ".join([row] * len(batch)), params)
    mark_saved(objs)


def mark_saved(objs: list[M]) -> None:
    """What ``save()`` notes on objects whose rows it inserted."""
    for obj in objs:
        obj._state.adding = False
        obj._state.db = DEFAULT_DB_ALIAS


def _field(meta: Any, name: str) -> Any:
    try:
        return meta.get_field(name)
    except FieldDoesNotExist:  # "pk", say: the ORM knows what it means
        return None


def _not_plain(value: Any) -> bool:
    return hasattr(value, "resolve_expression") or isinstance(value, models.Model)
