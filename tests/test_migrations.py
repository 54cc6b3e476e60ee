"""Every model change has its migration: a deployment's `migrate` builds the schema the
code expects (a field added without one fails at the first query, in production only).

And a release's migrations leave the previous release working: a PaaS runs the Procfile's
``release`` (``migrate``) while the old release still serves, and that code's INSERTs
leave out the columns it does not know. A column added NOT NULL needs a database default
for them (platform_site.migration_operations)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.core.management import call_command
from django.db import connection, models, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import AddField, SeparateDatabaseAndState
from django.db.migrations.operations.base import Operation

from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from agent_profiles.models import AgentProfile, Skill

# The project's apps: their migrations are the ones a release adds.
PROJECT_APPS = ("a2a", "agent_profiles", "gateway", "platform_site")


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")


def _added(operations: list[Operation]) -> Iterator[AddField]:
    for op in operations:
        if isinstance(op, AddField):
            yield op
        elif isinstance(op, SeparateDatabaseAndState):
            yield from _added(op.state_operations)


def _added_not_null_fields() -> list[tuple[str, str, models.Field]]:
    """(app, migration, the current model's field) for each field a migration added to an
    existing table, still there and NOT NULL: the columns the previous release's INSERTs
    may leave out."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = []
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        if app not in PROJECT_APPS:
            continue
        for op in _added(migration.operations):
            try:
                field = apps.get_model(app, op.model_name)._meta.get_field(op.name)
            except (LookupError, FieldDoesNotExist):
                continue  # the model or the field is gone since
            if not field.null and not field.many_to_many:
                found.append((app, name, field))
    return found


def test_every_column_added_not_null_has_a_database_default() -> None:
    missing = [
        f"{field.model.__name__}.{field.name} ({app} {name})"
        for app, name, field in _added_not_null_fields()
        if not (field.has_db_default() and field.has_default())
    ]
    assert not missing, (
        "these fields were added NOT NULL to an existing table without both a database "
        "default and a Python default: the previous release, still serving while the "
        "release phase runs `migrate` (deploy/Procfile), leaves the column out of its "
        "INSERTs and fails (NotNullViolation, a 500). Give each field db_default= equal to "
        "its default= (keep default=: without it a new instance holds a DatabaseDefault "
        "until saved), in the AddField itself for a new field, or for an existing column "
        "with platform_site.migration_operations.PostgreSQLDefaults: " + ", ".join(missing)
    )


def test_the_rule_sees_the_fields_added_since_the_first_migrations() -> None:
    # Not an empty check: the fields the rule was written for are among those it finds.
    names = {(f.model.__name__, f.name) for _, _, f in _added_not_null_fields()}
    assert {("Task", "watched"), ("AgentProfile", "security_requirements")} <= names


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_added_columns_have_their_defaults_in_postgresql() -> None:
    """The model's ``db_default`` is in the database too (a migration that set it in the
    state alone would pass the check above)."""
    wrong = []
    with connection.cursor() as cursor:
        for app, name, field in _added_not_null_fields():
            cursor.execute(
                "SELECT column_default FROM information_schema.columns"
                " WHERE table_name = %s AND column_name = %s",
                [field.model._meta.db_table, field.column],
            )
            row = cursor.fetchone()
            if row is None or row[0] is None:
                wrong.append(f"{field.model.__name__}.{field.name} ({app} {name})")
    assert not wrong, f"no database default on PostgreSQL: {', '.join(wrong)}"


@pytest.mark.django_db(transaction=True)
def test_json_database_defaults_fill_a_left_out_column() -> None:
    """{} and [] as a JSONField's ``db_default`` give a JSON value on both databases (on
    SQLite the migrations do not set them, but a table created with them must work)."""
    names = ["interface", "json_input", "security_schemes", "security_requirements"]
    fields: dict[str, Any] = {"id": models.AutoField(primary_key=True)}
    for name in names:
        fields[name] = AgentProfile._meta.get_field(name).clone()
    fields["note"] = models.CharField(max_length=10)
    fields["Meta"] = type(
        "Meta", (), {"app_label": "agent_profiles", "db_table": "t_json_defaults"}
    )
    fields["__module__"] = __name__
    Scratch = type("JsonDefaults", (models.Model,), fields)
    try:
        with connection.schema_editor() as editor:
            editor.create_model(Scratch)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO t_json_defaults (note) VALUES ('old')")
        row = Scratch.objects.get(note="old")
        assert [getattr(row, name) for name in names] == [{}, {}, {}, []]
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(Scratch)
        apps.all_models["agent_profiles"].pop("jsondefaults", None)
        apps.clear_cache()


# --- The previous release's INSERTs after `migrate` ---
# PostgreSQL only: the distributed mode is where a release phase migrates while the old
# release serves. On SQLite the migrations set no database default (see
# platform_site.migration_operations): the embedded platform migrates before it serves.


def _migrate(target: list[tuple[str, str]]) -> Any:
    """Migrate the test database to ``target``; answer the models as they were there (the
    old code's)."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


def _migrate_to_head() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def old_release() -> Iterator[Any]:
    """Call with a migration target: the old models; the schema is at HEAD after."""

    def at(target: list[tuple[str, str]]) -> Any:
        old_apps = _migrate(target)
        _migrate_to_head()
        return old_apps

    try:
        yield at
    finally:
        _migrate_to_head()  # whatever failed, the next tests find the schema at HEAD


@pytest.fixture
def agent_and_skill(transactional_db: None) -> tuple[AgentProfile, Skill]:
    skill = Skill.objects.create(
        id="s-old", name="s", description="d", input_schema={}, output_schema={}
    )
    agent = AgentProfile.objects.create(
        id="a-old", name="a", description="d", a2a_endpoint="http://127.0.0.1:9/a"
    )
    return agent, skill


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "before",
    [("a2a", "0007_task_state_deadline_index"), ("a2a", "0011_push_delivery_superseded")],
    ids=lambda t: t[1],
)
def test_the_previous_release_creates_a_task_after_migrate(
    before: tuple[str, str], old_release: Any, agent_and_skill: tuple[AgentProfile, Skill]
) -> None:
    agent, skill = agent_and_skill
    OldTask = old_release([before]).get_model("a2a", "Task")
    with transaction.atomic():
        OldTask.objects.create(id=uuid.uuid4(), agent_id=agent.pk, skill_id=skill.pk, input={})
    task = Task.objects.get()
    assert (task.watched, task.anonymous, task.push_offset) == (False, False, 0)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_previous_release_registers_an_agent_after_migrate(old_release: Any) -> None:
    # Before agent_profiles 0003: every column added to AgentProfile since is left out.
    old_apps = old_release([("agent_profiles", "0002_skill_schemas_may_be_empty")])
    OldAgent = old_apps.get_model("agent_profiles", "AgentProfile")
    with transaction.atomic():
        OldAgent.objects.create(id="a-older", name="a", description="d")
    agent = AgentProfile.objects.get(id="a-older")
    assert (agent.interface, agent.security_requirements, agent.json_input) == ({}, [], {})
    assert (agent.polling, agent.listing, agent.early_return, agent.streaming) == (
        True,
        True,
        True,
        False,
    )
    assert (agent.health_status, agent.auth_encrypted, agent.target) == ("unknown", "", "")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_previous_release_starts_a_listing_and_a_push_config_after_migrate(
    old_release: Any, agent_and_skill: tuple[AgentProfile, Skill]
) -> None:
    agent, skill = agent_and_skill
    old_apps = old_release([("a2a", "0004_agent_listing")])  # before overlap, push protocol
    with transaction.atomic():
        old_apps.get_model("a2a", "AgentListing").objects.create(agent_id=agent.pk)
        task = old_apps.get_model("a2a", "Task").objects.create(
            id=uuid.uuid4(), agent_id=agent.pk, skill_id=skill.pk, input={}
        )
        old_apps.get_model("a2a", "PushNotificationConfig").objects.create(
            task_id=task.pk, config_id="c", url="http://127.0.0.1:9/hook"
        )
    listing = AgentListing.objects.get()
    assert (listing.overlap, listing.failures, listing.truncations) == (5.0, 0, 0)
    assert PushNotificationConfig.objects.get().protocol_version == "1.0"
