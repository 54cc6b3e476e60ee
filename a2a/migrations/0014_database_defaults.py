"""Database defaults for the columns added NOT NULL since 0001 (Task.watched, .anonymous,
.push_offset, AgentListing.overlap, .failures, .truncations,
PushNotificationConfig.protocol_version): the previous release, still serving while the
release phase migrates, leaves them out of its INSERTs (platform_site.migration_operations).
Set on PostgreSQL only: a moment there, no row changes; SQLite would rebuild each table."""

from django.db import migrations, models

from platform_site.migration_operations import PostgreSQLDefaults


class Migration(migrations.Migration):
    dependencies = [
        ("a2a", "0013_agent_listing_failures"),
    ]

    operations = [
        PostgreSQLDefaults(
            [
                migrations.AlterField(
                    model_name="agentlisting",
                    name="failures",
                    field=models.PositiveIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="agentlisting",
                    name="overlap",
                    field=models.FloatField(db_default=5.0, default=5.0),
                ),
                migrations.AlterField(
                    model_name="agentlisting",
                    name="truncations",
                    field=models.PositiveIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="pushnotificationconfig",
                    name="protocol_version",
                    field=models.CharField(
                        choices=[("1.0", "A2A 1.0"), ("0.3", "A2A 0.3")],
                        db_default="1.0",
                        default="1.0",
                        max_length=8,
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="anonymous",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="push_offset",
                    field=models.PositiveIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="watched",
                    field=models.BooleanField(db_default=False, default=False),
                ),
            ]
        ),
    ]
