"""Task indexes without PostgreSQL's "_like" twins (see ``Task.Meta.indexes``).

The indexes ``db_index`` made are kept (renamed on PostgreSQL, so no index is built again
on a large table; rebuilt on SQLite, which cannot rename an index) and the six
``varchar_pattern_ops`` copies PostgreSQL added beside them are dropped.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from platform_site.migration_ops import plain_indexes

# column -> (the name Django gave the index of db_index / a foreign key, the new name)
INDEXES = {
    "state": ("a2a_task_state_eb43c11c", "task_state"),
    "context_id": ("a2a_task_context_id_1e5b1def", "task_context"),
    "remote_task_id": ("a2a_task_remote_task_id_0c7a71bc", "task_remote_task"),
    "skill_id": ("a2a_task_skill_id_71421192", "task_skill"),
    "agent_id": ("a2a_task_agent_id_a70006f6", "task_agent"),
    "created_by_agent_id": ("a2a_task_created_by_agent_id_6401983d", "task_created_by_agent"),
}


class Migration(migrations.Migration):
    dependencies = [
        ("a2a", "0005_listing_overlap"),
        ("agent_profiles", "0006_agent_listing_flag"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="task",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="tasks",
                        to="agent_profiles.agentprofile",
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="context_id",
                    field=models.CharField(blank=True, default="", max_length=200),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="created_by_agent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="requested_tasks",
                        to="agent_profiles.agentprofile",
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="remote_task_id",
                    field=models.CharField(blank=True, max_length=200),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="skill",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="tasks",
                        to="agent_profiles.skill",
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="state",
                    field=models.CharField(
                        choices=[
                            ("TASK_STATE_SUBMITTED", "Submitted"),
                            ("TASK_STATE_WORKING", "Working"),
                            ("TASK_STATE_INPUT_REQUIRED", "Input required"),
                            ("TASK_STATE_AUTH_REQUIRED", "Auth required"),
                            ("TASK_STATE_COMPLETED", "Completed"),
                            ("TASK_STATE_FAILED", "Failed"),
                            ("TASK_STATE_CANCELED", "Canceled"),
                            ("TASK_STATE_REJECTED", "Rejected"),
                        ],
                        default="TASK_STATE_SUBMITTED",
                        max_length=32,
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["state"], name="task_state"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["context_id"], name="task_context"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["remote_task_id"], name="task_remote_task"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["skill"], name="task_skill"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["agent"], name="task_agent"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(fields=["created_by_agent"], name="task_created_by_agent"),
                ),
            ],
            database_operations=[plain_indexes("a2a_task", INDEXES)],
        ),
    ]
