"""A migration operation for tables whose indexes move from ``db_index`` to ``Meta.indexes``.

On PostgreSQL ``db_index`` on a text column, and a foreign key to a text id, come with a
second index, ``<name>_like`` (``varchar_pattern_ops``, for case-sensitive ``LIKE``),
written on every INSERT and on every UPDATE of the column. The platform's queries never
use them, so its hot tables declare plain indexes in ``Meta.indexes`` instead.
:func:`plain_indexes` is the database side of that change, for a migration's
``SeparateDatabaseAndState``: it keeps each index under its new name (renamed on
PostgreSQL, so nothing is built again on a large table; rebuilt on SQLite, which cannot
rename an index), drops the indexes another one now covers, and drops the ``_like``
copies. Backwards it restores all of them. Kept stable: migrations import it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import migrations


def plain_indexes(
    table: str,
    renamed: dict[str, tuple[str, str]],
    dropped: dict[str, str] | None = None,
) -> migrations.RunPython:
    """``renamed``: column -> (Django's index name, the new name); ``dropped``: column ->
    Django's index name, for an index no longer wanted (another index leads with the
    column). Built from partials of a module function, not lambdas, so that Django can
    still write the operation out (``squashmigrations``)."""
    gone = dropped or {}
    return migrations.RunPython(
        partial(_run, table, renamed, gone, True), partial(_run, table, renamed, gone, False)
    )


def _run(
    table: str,
    renamed: dict[str, tuple[str, str]],
    gone: dict[str, str],
    forward: bool,
    apps: Any,
    schema_editor: Any,
) -> None:
    postgres = schema_editor.connection.vendor == "postgresql"
    execute = schema_editor.execute
    for column, (old, new) in renamed.items():
        now, then = (new, old) if forward else (old, new)
        if postgres:
            execute(f'ALTER INDEX IF EXISTS "{then}" RENAME TO "{now}"')
        else:
            execute(f'DROP INDEX IF EXISTS "{then}"')
        execute(f'CREATE INDEX IF NOT EXISTS "{now}" ON "{table}" ("{column}")')
    for column, old in gone.items():
        if forward:
            execute(f'DROP INDEX IF EXISTS "{old}"')
        else:
            execute(f'CREATE INDEX IF NOT EXISTS "{old}" ON "{table}" ("{column}")')
    if not postgres:
        return
    for column, old in [(c, names[0]) for c, names in renamed.items()] + list(gone.items()):
        if forward:
            execute(f'DROP INDEX IF EXISTS "{old}_like"')
        else:
            execute(
                f'CREATE INDEX IF NOT EXISTS "{old}_like" ON "{table}" '
                f'("{column}" varchar_pattern_ops)'
            )
