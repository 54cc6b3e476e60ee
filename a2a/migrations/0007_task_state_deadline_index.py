"""The task's state index becomes (state, deadline_at): the sweep's search for overdue
tasks (``a2a.deadlines.expire_overdue``, every sweep) read every task in flight, or the whole
table when most tasks were in flight, to find the few past their deadline; the pair
answers it from the index. It leads with ``state``, so it serves every search by state
the old index did, and the table keeps the same number of indexes to write.

On PostgreSQL the new index is built ``CONCURRENTLY`` before the old one is dropped
(``CONCURRENTLY`` too), so a large table takes writes throughout; hence this migration
is not atomic. SQLite builds it in place.
"""

from functools import partial
from typing import Any

from django.db import migrations, models

NEW = ("task_state_deadline", '("state", "deadline_at")')
OLD = ("task_state", '("state")')


def _swap(build: tuple[str, str], drop: tuple[str, str], apps: Any, schema_editor: Any) -> None:
    concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
    name, columns = build
    schema_editor.execute(
        f'CREATE INDEX{concurrently} IF NOT EXISTS "{name}" ON "a2a_task" {columns}'
    )
    schema_editor.execute(f'DROP INDEX{concurrently} IF EXISTS "{drop[0]}"')


class Migration(migrations.Migration):
    atomic = False  # CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("a2a", "0006_task_indexes_without_like")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="task", name="task_state"),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["state", "deadline_at"], name="task_state_deadline"),
                ),
            ],
            database_operations=[
                migrations.RunPython(partial(_swap, NEW, OLD), partial(_swap, OLD, NEW)),
            ],
        ),
    ]
