"""Writes that belong together, sent as one PostgreSQL statement (data-modifying WITH).

Every statement is a round trip to PostgreSQL, and a transaction adds two (BEGIN and
COMMIT): a transition (the task's conditional UPDATE and its event's INSERT) took four, a
new task (the task, its first event and its first message) five. PostgreSQL runs one
statement with data-modifying ``WITH`` clauses atomically on its own, all or nothing, so
one statement does what the transaction did. Measured on transitions (one process,
alternating runs): 440-567 -> 367-373 us of PostgreSQL CPU and 403-514 -> 198-225 us of
the caller's CPU each.

Outside a transaction by default: inside one, a caller's ``atomic()`` block sets a
savepoint that keeps an error in its writes from aborting the outer transaction (new
tasks keep it: a repeated idempotency key is caught there). A caller whose database
errors end the transaction anyway joins it instead (``joining``): a transition inside a
push's transaction (or a person's reply's) is then one statement, not a savepoint, an
UPDATE, an INSERT and the savepoint's release.
SQLite has no data-modifying ``WITH``; there the callers keep their transaction, which
costs no round trips. The statements are built from the plain writes of
:mod:`platform_site.compiled_writes`, with the same preparation of every value.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

from platform_site.compiled_writes import insert_plan, mark_saved, prep_save, update_sql


def available(*, joining: bool = False) -> bool:
    """Whether writes can be combined here now: PostgreSQL, outside any transaction (or
    inside one, ``joining`` it)."""
    connection = connections[DEFAULT_DB_ALIAS]
    return connection.vendor == "postgresql" and (joining or not connection.in_atomic_block)


def _insert(obj: models.Model, connection: Any, *, select_from: str = "") -> tuple[str, list]:
    """One new row's INSERT (``... SELECT ... FROM select_from``: only for each row there)."""
    fields, insert, row = insert_plan(type(obj), connection, obj.pk is None)
    params = [prep_save(f, f.pre_save(obj, True), connection) for f in fields]
    if select_from:
        return f"{insert.removesuffix('VALUES ')}SELECT {row[1:-1]} FROM {select_from}", params
    return insert + row, params


def insert_together(objs: list[models.Model]) -> bool:
    """Insert these new rows (of any models, in this order) in one statement; False, with
    nothing written, when :func:`available` says no (the caller inserts them itself)."""
    if not objs or not available():
        return False
    connection = connections[DEFAULT_DB_ALIAS]
    parts = [_insert(obj, connection) for obj in objs]
    *first, (last, _) = parts
    clauses = ", ".join(f"row{index} AS ({sql})" for index, (sql, _) in enumerate(first))
    sql = f"WITH {clauses} {last}" if clauses else last
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for _, params in parts for value in params])
    mark_saved(objs)
    return True


def update_then_insert(
    model: type[models.Model],
    pk: Any,
    conditions: dict[str, Any],
    fields: dict[str, Any],
    new: models.Model,
    *,
    returning: str,
    joining: bool = False,
) -> list[Any] | None:
    """:func:`~platform_site.compiled_writes.update_row`, and ``new`` inserted only when the row
    changed, in one statement; returns the column ``returning`` of the row changed
    (``[]`` when it did not change), or None with nothing written when it cannot be done
    so (not :func:`available`, or a value or condition that is not plain): the caller
    then writes both in a transaction.

    ``joining``: inside a caller's transaction too, as part of it, with no savepoint: an
    error in the statement aborts the caller's transaction. Only for a caller that never
    catches a database error inside its transaction."""
    if not available(joining=joining):
        return None
    connection = connections[DEFAULT_DB_ALIAS]
    built = update_sql(connection, model, pk, conditions, fields)
    if built is None or not built[0]:
        return None
    update, update_params = built
    insert, insert_params = _insert(new, connection, select_from="changed")
    column = connection.ops.quote_name(model._meta.get_field(returning).column)
    # One row in "changed" per row updated (at most one: the primary key is a condition).
    # A data-modifying WITH runs whether or not the main query reads it.
    sql = (
        f"WITH changed AS ({update} RETURNING {column}), added AS ({insert}) "
        f"SELECT {column} FROM changed"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, update_params + insert_params)
        values = [row[0] for row in cursor.fetchall()]
    if values:
        mark_saved([new])
    return values
