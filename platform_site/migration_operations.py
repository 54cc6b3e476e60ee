"""A migration operation that gives existing columns their database defaults on PostgreSQL.

Why the columns need one: in the distributed mode a PaaS runs the Procfile's ``release``
(``manage.py migrate``) while the previous release still serves. That code's models do not
know the columns a later ``AddField`` brought, and its INSERTs leave them out; a NOT NULL
column with only a Python default refuses them (creating a task, registering an agent:
500 until every process runs the new code). A database default (``db_default``) fills
the column instead. The models keep their Python ``default`` too: with ``db_default``
alone a new instance holds a ``DatabaseDefault`` expression until it is saved, which code
reading the field after ``create()`` would see.

Why on PostgreSQL only: there ``ALTER COLUMN ... SET DEFAULT`` changes no row and holds its
lock for a moment, whatever the table's size. On SQLite every ``AlterField`` rebuilds the
table (copies every row: about 10 s per 100,000 tasks, for each field), and nothing needs
the default there: the embedded platform migrates before it serves, so no old code runs
beside the new schema. So the state part (the models' ``db_default``) always applies, and
the database part runs on PostgreSQL alone; SQLite's INSERTs keep writing every column
from the Python default. Kept stable: migrations import it.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.migrations.operations.base import Operation


class PostgreSQLDefaults(migrations.SeparateDatabaseAndState):
    """``AlterField`` operations that add a ``db_default`` to existing columns: applied to
    the migration state everywhere, to the database on PostgreSQL only (both ways, so
    the migration is reversible: backwards drops the defaults again)."""

    def __init__(self, operations: list[Operation]) -> None:
        super().__init__(database_operations=operations, state_operations=operations)

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        # Written out (squashmigrations) as this class, not as SeparateDatabaseAndState.
        return self.__class__.__qualname__, [], {"operations": self.state_operations}

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self) -> str:
        return "Set database defaults (PostgreSQL) of " + ", ".join(
            f"{op.model_name}.{op.name}" for op in self.state_operations
        )

    @property
    def migration_name_fragment(self) -> str:
        return "database_defaults"
