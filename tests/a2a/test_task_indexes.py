"""The task table's indexes: one plain index per searched column, no PostgreSQL "_like"
twins (each index is written on every INSERT and on every transition), and a migration
that keeps the existing indexes both ways."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from a2a.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

# The migration before the change, and the one making it.
BEFORE = ("a2a", "0005_listing_overlap")
AFTER = ("a2a", "0006_task_indexes_without_like")

EXPECTED = {
    "task_due": ["next_action", "next_poll_at"],
    "task_state": ["state"],
    "task_context": ["context_id"],
    "task_remote_task": ["remote_task_id"],
    "task_skill": ["skill_id"],
    "task_agent": ["agent_id"],
    "task_created_by_agent": ["created_by_agent_id"],
}


def indexes() -> dict[str, list[str]]:
    """Every index of the task table (constraints' and the primary key's excepted)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, Task._meta.db_table)
    return {
        name: info["columns"]
        for name, info in found.items()
        if info["index"] and not info["unique"] and not info["primary_key"]
    }


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


@pytest.fixture
def back_to_latest() -> Iterator[None]:
    yield
    migrate(AFTER)  # whatever the test left, the next tests get the current schema


def test_each_searched_column_has_one_plain_index() -> None:
    found = indexes()
    for name, columns in EXPECTED.items():
        assert found.get(name) == columns, (name, found)
    assert not [name for name in found if name.endswith("_like")]
    # created_by (an integer user id) keeps the index Django gives a foreign key
    assert ["created_by_id"] in found.values()


def test_the_migration_keeps_the_indexes_both_ways(back_to_latest: None) -> None:
    migrate(BEFORE)
    before = indexes()
    assert "task_state" not in before
    assert before["a2a_task_state_eb43c11c"] == ["state"]
    if connection.vendor == "postgresql":
        assert before["a2a_task_state_eb43c11c_like"] == ["state"]
    migrate(AFTER)
    after = indexes()
    for name, columns in EXPECTED.items():
        assert after.get(name) == columns, (name, after)
    assert not [name for name in after if name.endswith("_like")]
    assert "a2a_task_state_eb43c11c" not in after
    # nothing else changed: the same columns are indexed, less the "_like" copies
    plain = sorted(columns for name, columns in before.items() if not name.endswith("_like"))
    assert sorted(after.values()) == plain
