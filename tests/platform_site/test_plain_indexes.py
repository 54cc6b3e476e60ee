"""The hot tables' indexes: one plain index per searched column, no PostgreSQL "_like"
twins (each index is written on every INSERT and every UPDATE of its column), and
migrations that keep the existing indexes both ways (platform_site.migration_ops)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Table:
    name: str
    before: tuple[str, str]  # the migration before the change
    after: tuple[str, str]  # the one making it
    expected: dict[str, list[str]]  # index -> columns, after
    renamed: tuple[str, str, list[str]]  # one of Django's old names, its new one, columns
    dropped: list[str]  # indexes the change removes (another one covers them)
    later: dict[str, list[str] | None] = field(default_factory=dict)  # changes since: None drops


def latest(table: Table) -> dict[str, list[str]]:
    """The indexes the table has now: the change's, with the later changes applied."""
    now = {**table.expected, **table.later}
    return {name: columns for name, columns in now.items() if columns is not None}


TABLES = [
    Table(
        "a2a_task",
        ("a2a", "0005_listing_overlap"),
        ("a2a", "0006_task_indexes_without_like"),
        {
            "task_due": ["next_action", "next_poll_at"],
            "task_state": ["state"],
            "task_context": ["context_id"],
            "task_remote_task": ["remote_task_id"],
            "task_skill": ["skill_id"],
            "task_agent": ["agent_id"],
            "task_created_by_agent": ["created_by_agent_id"],
            "a2a_task_created_by_id_29c0d937": ["created_by_id"],  # an integer id: kept
        },
        ("a2a_task_state_eb43c11c", "task_state", ["state"]),
        [],
        # 0007: the state index takes the deadline too (the sweep's overdue search)
        {"task_state": None, "task_state_deadline": ["state", "deadline_at"]},
    ),
    Table(
        "gateway_delivery",
        ("gateway", "0001_deliveries_presence_offline"),
        ("gateway", "0002_delivery_indexes_without_like"),
        {
            "delivery_outbox": ["agent_id", "status", "created_at"],
            "delivery_status": ["status"],
            "gateway_delivery_task_id_dd268066": ["task_id"],
        },
        ("gateway_delivery_status_51d832f7", "delivery_status", ["status"]),
        ["gateway_delivery_agent_id_9b67c7f1"],
    ),
]


def indexes(table: str) -> dict[str, list[str]]:
    """Every index of the table (constraints' and the primary key's excepted)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {
        name: info["columns"]
        for name, info in found.items()
        if info["index"] and not info["unique"] and not info["primary_key"]
    }


def migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


@pytest.fixture
def back_to_latest() -> Iterator[None]:
    yield
    # whatever the test left, the next tests get the current schema of every app
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_each_searched_column_has_one_plain_index(table: Table) -> None:
    found = indexes(table.name)
    for name, columns in latest(table).items():
        assert found.get(name) == columns, (name, found)
    assert not [name for name in found if name.endswith("_like")]
    assert not set(table.dropped) & set(found)
    assert not {name for name, columns in table.later.items() if columns is None} & set(found)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_the_migration_keeps_the_indexes_both_ways(table: Table, back_to_latest: None) -> None:
    old, new, columns = table.renamed
    migrate([table.before])
    before = indexes(table.name)
    assert new not in before
    assert before[old] == columns
    if connection.vendor == "postgresql":
        assert before[f"{old}_like"] == columns
    for name in table.dropped:
        assert name in before
    migrate([table.after])
    after = indexes(table.name)
    for name, cols in table.expected.items():
        assert after.get(name) == cols, (name, after)
    assert not [name for name in after if name.endswith("_like")]
    assert old not in after
    # nothing else changed: the same columns indexed, less the "_like" copies and the
    # indexes another one covers
    kept = sorted(
        cols
        for name, cols in before.items()
        if not name.endswith("_like") and name not in table.dropped
    )
    assert sorted(after.values()) == kept
