"""Compiled reads return exactly what the ORM's ``get()`` returns (on SQLite and on
PostgreSQL, whose drivers hand back different types for the same columns)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from datetime import timezone as timezone_offset
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a.models import Task
from a2a.states import TaskState
from agent_profiles import keys
from agent_profiles.models import UserToken
from platform_site.compiled import CompiledGet

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    agent = make_agent(skills=[skill])
    return Task.objects.create(
        skill=skill,
        agent=agent,
        input={"product": "x", "nested": [1, {"ü": None}]},
        artifacts=[{"artifactId": "a", "parts": [{"data": {"n": 1.5}}]}],
        metadata={"followedBy": "push"},
        deadline_at=timezone.now(),
        created_by=make_user(),
    )


def test_a_compiled_read_equals_the_orms(task: Task) -> None:
    read = CompiledGet(Task).get(task.pk)
    expected = Task.objects.get(pk=task.pk)
    assert read is not None
    for field in Task._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
        assert type(getattr(read, field.attname)) is type(getattr(expected, field.attname))
    assert (read._state.db, read._state.adding) == ("default", False)
    assert read.output is None
    assert read.question is None


def test_a_compiled_list_equals_the_orms_filter_in_its_order(task: Task) -> None:
    from a2a.models import TaskMessage

    earlier = timezone.now() - timedelta(minutes=5)
    for n, at in enumerate([timezone.now(), earlier, earlier]):
        TaskMessage.objects.create(
            task=task, direction="to_agent", message_id=f"m{n}", message={"n": n}, created_at=at
        )
    other = Task.objects.create(skill=task.skill, agent=task.agent, deadline_at=timezone.now())
    TaskMessage.objects.create(task=other, direction="to_agent", message_id="x", message={})
    reads = CompiledGet(TaskMessage, "task", order_by=("created_at", "pk"))
    expected = list(TaskMessage.objects.filter(task=task).order_by("created_at", "pk"))
    found = reads.all(task.pk)
    assert [m.message_id for m in found] == ["m1", "m2", "m0"]
    for read, orm in zip(found, expected, strict=True):
        for field in TaskMessage._meta.concrete_fields:
            assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
    assert reads.all(uuid.uuid4()) == []


def test_a_joined_read_equals_the_orms_select_related(task: Task) -> None:
    reads = CompiledGet(Task, related=("agent", "skill"))
    expected = Task.objects.select_related("agent", "skill").get(pk=task.pk)
    with CaptureQueriesContext(connection) as queries:
        read = reads.get(task.pk)
        assert read is not None
        # the agent and the skill came with the task: no query to reach them
        rows = [(read, expected), (read.agent, expected.agent), (read.skill, expected.skill)]
    assert len(queries.captured_queries) == 1
    for ours, theirs in rows:
        for field in type(theirs)._meta.concrete_fields:
            name = field.attname
            assert getattr(ours, name) == getattr(theirs, name), (type(theirs), name)
            assert type(getattr(ours, name)) is type(getattr(theirs, name)), (type(theirs), name)
        assert (ours._state.db, ours._state.adding) == ("default", False)
    assert reads.get(uuid.uuid4()) is None


def test_a_joined_read_takes_no_row_lock(task: Task) -> None:
    with pytest.raises(ValueError, match="no row lock"), transaction.atomic():
        CompiledGet(Task, related=("agent",)).get(task.pk, lock=True)


def test_a_token_and_its_user_are_read_in_one_statement(make_user: Any) -> None:
    user = make_user()
    with CaptureQueriesContext(connection) as queries:
        found = UserToken.authenticate(user.raw_token)
    assert found == user
    assert [q["sql"].split()[0] for q in queries.captured_queries][:1] == ["SELECT"]
    assert sum(q["sql"].startswith("SELECT") for q in queries.captured_queries) == 1


def test_a_compiled_read_accepts_the_id_as_text_and_finds_nothing_for_an_unknown_one(
    task: Task,
) -> None:
    reads = CompiledGet(Task)
    found = reads.get(str(task.pk))
    assert found is not None
    assert found.pk == task.pk
    assert reads.get(uuid.uuid4()) is None


def test_a_compiled_read_by_a_unique_column(make_user: Any) -> None:
    raw = UserToken.issue(make_user())
    token = UserToken.objects.get(prefix=keys.parse_prefix(raw, "usr"))
    found = CompiledGet(UserToken, "prefix").get(token.prefix)
    assert found is not None
    assert found.pk == token.pk
    assert found.digest == token.digest
    assert CompiledGet(UserToken, "prefix").get("usr_nothing") is None


def test_the_instance_read_can_be_written_back(task: Task) -> None:
    read = CompiledGet(Task).get(task.pk)
    assert read is not None
    assert read.start_work("test")
    assert Task.objects.get(pk=task.pk).state == TaskState.WORKING


def test_a_locked_read_takes_the_row_lock_on_postgresql(task: Task) -> None:
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        read = CompiledGet(Task).get(task.pk, lock=True)
    assert read is not None
    assert read.pk == task.pk
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert len(selects) == 1
    assert selects[0].endswith("FOR UPDATE") == (connection.vendor == "postgresql")
    assert "ORDER BY" not in selects[0]  # Task's default ordering is useless for one row


def test_a_compiled_read_by_an_integer_key(make_user: Any) -> None:
    from django.contrib.auth import get_user_model

    user = make_user()
    found = CompiledGet(get_user_model()).get(user.pk)
    assert found is not None
    assert (found.username, found.is_active, found.date_joined) == (
        user.username,
        user.is_active,
        get_user_model().objects.get(pk=user.pk).date_joined,
    )
    assert CompiledGet(get_user_model()).get(user.pk + 1000) is None


def test_a_plain_update_writes_what_the_orms_update_writes(task: Task) -> None:
    from platform_site.compiled_writes import update_row

    now = timezone.now()
    fields = {"metadata": {"a": [1, "ü"]}, "output": None, "deadline_at": now, "attempts": 3}
    assert update_row(Task, task.pk, {"state": TaskState.SUBMITTED}, fields) == 1
    row = Task.objects.get(pk=task.pk)
    assert (row.metadata, row.output, row.deadline_at, row.attempts) == (
        {"a": [1, "ü"]},
        None,
        now,
        3,
    )
    # A condition that does not hold changes nothing; NULL conditions are IS NULL.
    assert update_row(Task, task.pk, {"state": TaskState.WORKING}, {"attempts": 9}) == 0
    assert update_row(Task, str(task.pk), {"lease_until": None}, {"attempts": 4}) == 1
    assert Task.objects.get(pk=task.pk).attempts == 4


def test_a_plain_update_leaves_what_it_cannot_write_to_the_orm(task: Task) -> None:
    from django.db.models import F

    from platform_site.compiled_writes import update_row

    assert update_row(Task, task.pk, {}, {"attempts": F("attempts") + 1}) is None
    assert update_row(Task, task.pk, {}, {"agent": task.agent}) is None
    assert update_row(Task, task.pk, {"state__in": ["x"]}, {"attempts": 1}) is None
    assert update_row(Task, task.pk, {"metadata": {}}, {"attempts": 1}) is None
    assert Task.objects.get(pk=task.pk).attempts == 0


def test_a_kept_update_plan_follows_each_condition_being_none_or_not(task: Task) -> None:
    """The statement is kept per set of names and per which conditions are None (IS NULL
    against = %s), so one kept for the one shape never serves the other."""
    from platform_site.compiled_writes import update_row

    held = timezone.now()
    for _ in range(2):  # the second round runs on the kept plans
        Task.objects.filter(pk=task.pk).update(lease_until=None, attempts=0)
        assert update_row(Task, task.pk, {"lease_until": held}, {"attempts": 1}) == 0
        assert update_row(Task, task.pk, {"lease_until": None}, {"attempts": 2}) == 1
        Task.objects.filter(pk=task.pk).update(lease_until=held)
        assert update_row(Task, task.pk, {"lease_until": None}, {"attempts": 3}) == 0
        assert update_row(Task, task.pk, {"lease_until": held}, {"attempts": 4}) == 1
        assert Task.objects.get(pk=task.pk).attempts == 4
    # Other values keep going through the plan of their names, not the first call's.
    assert update_row(Task, task.pk, {"lease_until": held}, {"attempts": 5}) == 1
    assert Task.objects.get(pk=task.pk).attempts == 5


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 2, 7, 42, 14, 43824, tzinfo=UTC),
        datetime(2026, 12, 2, 7, 42, 14, tzinfo=UTC),  # no microseconds
        datetime(2026, 12, 2, 9, 42, 14, 5, tzinfo=timezone_offset(timedelta(hours=2))),
        datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin")),
        None,
    ],
)
def test_prep_save_prepares_a_datetime_as_django_does(value: Any) -> None:
    from platform_site.compiled_writes import prep_save

    field = Task._meta.get_field("next_poll_at")
    assert prep_save(field, value, connection) == field.get_db_prep_save(value, connection)
    other = Task._meta.get_field("remote_task_id")
    assert prep_save(other, "x", connection) == other.get_db_prep_save("x", connection)


def test_a_naive_datetime_still_gets_djangos_warning() -> None:
    from platform_site.compiled_writes import prep_save

    field = Task._meta.get_field("next_poll_at")
    naive = datetime(2026, 12, 2, 7, 42, 14)
    with pytest.warns(RuntimeWarning, match="naive datetime"):
        saved = prep_save(field, naive, connection)
    with pytest.warns(RuntimeWarning):
        assert saved == field.get_db_prep_save(naive, connection)


def test_many_plain_updates_go_together_and_count_what_they_changed(task: Task) -> None:
    from platform_site.compiled_writes import update_rows

    others = [
        Task.objects.create(
            skill=task.skill, agent=task.agent, input={}, created_by=task.created_by
        )
        for _ in range(3)
    ]
    due = timezone.now()
    updates: list[tuple[Any, dict[str, Any], dict[str, Any]]] = [
        (row.pk, {"state": TaskState.SUBMITTED}, {"attempts": 7, "next_poll_at": due})
        for row in [task, *others[:2]]
    ]
    # Another state than the row's: that row's condition fails, the others still count.
    updates.append(
        (others[2].pk, {"state": TaskState.WORKING}, {"attempts": 7, "next_poll_at": due})
    )
    with CaptureQueriesContext(connection) as queries:
        assert update_rows(Task, updates) == 3
    assert len(queries) <= 2  # one executemany for the three alike, one for the odd one
    attempts = dict(Task.objects.values_list("pk", "attempts"))
    assert [attempts[row.pk] for row in [task, *others]] == [7, 7, 7, 0]
    assert Task.objects.get(pk=task.pk).next_poll_at == due


def test_many_updates_write_nothing_when_one_cannot_be_written_plainly(task: Task) -> None:
    from django.db.models import F

    from platform_site.compiled_writes import update_rows

    updates = [
        (task.pk, {}, {"attempts": 5}),
        (task.pk, {}, {"attempts": F("attempts") + 1}),
    ]
    assert update_rows(Task, updates) is None
    assert Task.objects.get(pk=task.pk).attempts == 0
    assert update_rows(Task, []) == 0


def test_plain_inserts_store_what_bulk_create_stores(
    task: Task, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """Rows with their own ids (tasks) and rows the database numbers (events), JSON,
    times, NULLs and foreign keys: read back, each equals its bulk_create twin."""
    from a2a.models import TaskEvent, TaskMessage
    from platform_site.compiled_writes import insert_rows

    def twins() -> list[Task]:
        return [
            Task(
                skill=task.skill,
                agent=task.agent,
                input={"n": i, "deep": [{"ü": None}]},
                metadata={"match": {"at": "now"}},
                deadline_at=task.deadline_at,
                created_by=task.created_by,
            )
            for i in range(3)
        ]

    plain, orm = twins(), twins()
    insert_rows(plain)
    Task.objects.bulk_create(orm)
    assert all((t._state.adding, t._state.db) == (False, "default") for t in plain)
    for mine, theirs in zip(plain, orm, strict=True):
        mine_row, their_row = Task.objects.get(pk=mine.pk), Task.objects.get(pk=theirs.pk)
        for field in Task._meta.concrete_fields:
            if field.primary_key or field.name in (
                "created_at",
                "updated_at",
                "state_changed_at",
                "next_poll_at",
            ):
                continue
            assert getattr(mine_row, field.attname) == getattr(their_row, field.attname), field.name
    now = timezone.now()
    events = [TaskEvent(task=t, at=now, from_state="", to_state="x", reason="r") for t in plain]
    insert_rows(events)
    assert [e.pk for e in events] == [None] * 3  # numbered by the database, not read back
    stored = TaskEvent.objects.filter(task__in=plain).order_by("id")
    assert [(e.task_id, e.at, e.to_state, e.reason) for e in stored] == [
        (t.pk, now, "x", "r") for t in plain
    ]
    insert_rows([])  # nothing to do
    message = TaskMessage(task=task, direction="to_agent", message={"parts": []})
    with pytest.raises(ValueError, match="one model"):
        insert_rows([message, events[0]])


def test_plain_inserts_are_batched_under_the_databases_parameter_limit(task: Task) -> None:
    """8,000 rows of 5 columns: 40,000 parameters, over SQLite's limit (32,766) for one
    statement."""
    from a2a.models import TaskEvent
    from platform_site.compiled_writes import insert_rows

    now = timezone.now()
    insert_rows([TaskEvent(task=task, at=now, to_state=f"s{i}") for i in range(8000)])
    assert TaskEvent.objects.filter(task=task, at=now).count() == 8000


def test_many_plain_inserts_on_postgresql_run_one_cached_single_row_statement(
    task: Task,
) -> None:
    """psycopg converts a statement's placeholders once and keeps it only for up to 50 of
    them: a batch's multi-row INSERT (100 tasks x 30 columns) was converted anew at every
    batch. On PostgreSQL the rows go as one single-row statement, run for each row."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's driver only")
    from psycopg import _queries

    from platform_site.compiled_writes import insert_rows

    rows = [Task(skill=task.skill, agent=task.agent, input={"n": i}) for i in range(100)]
    with CaptureQueriesContext(connection) as queries:
        insert_rows(rows)
    (sql,) = [q["sql"] for q in queries.captured_queries]
    assert sql.startswith("100 times: INSERT")  # Django's record of one executemany
    assert sql.count("%s") <= _queries.MAX_CACHED_STATEMENT_PARAMS
    assert Task.objects.filter(input__n__gte=0).count() == 100
