"""Database defaults for AgentProfile's columns added NOT NULL since 0001 (0003, 0006,
0007, 0008): the previous release, still serving while the release phase migrates, leaves
them out of its INSERTs when it registers an agent (platform_site.migration_operations).
Set on PostgreSQL only: a moment there, no row changes; SQLite would rebuild the table for
each field."""

from django.db import migrations, models

from platform_site.migration_operations import PostgreSQLDefaults


class Migration(migrations.Migration):
    dependencies = [
        ("agent_profiles", "0010_agent_caller_salt"),
    ]

    operations = [
        PostgreSQLDefaults(
            [
                migrations.AlterField(
                    model_name="agentprofile",
                    name="agent_card_url",
                    field=models.URLField(blank=True, db_default="", default="", max_length=500),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="auth_encrypted",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="auth_type",
                    field=models.CharField(blank=True, db_default="", default="", max_length=16),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="card_error",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="early_return",
                    field=models.BooleanField(db_default=True, default=True),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="early_return_seen",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="health_error",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="health_status",
                    field=models.CharField(
                        choices=[
                            ("healthy", "Healthy"),
                            ("unhealthy", "Unhealthy"),
                            ("unknown", "Unknown"),
                        ],
                        db_default="unknown",
                        default="unknown",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="interface",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="json_input",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="last_call_code",
                    field=models.CharField(blank=True, db_default="", default="", max_length=64),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="last_call_error",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="listing",
                    field=models.BooleanField(db_default=True, default=True),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="no_early_return_reason",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="no_listing_reason",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="no_polling_reason",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="polling",
                    field=models.BooleanField(db_default=True, default=True),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="protocol_binding",
                    field=models.CharField(blank=True, db_default="", default="", max_length=16),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="protocol_version",
                    field=models.CharField(blank=True, db_default="", default="", max_length=8),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="push_notifications",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="security_requirements",
                    field=models.JSONField(blank=True, db_default=[], default=list),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="security_schemes",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="streaming",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="agentprofile",
                    name="target",
                    field=models.CharField(blank=True, db_default="", default="", max_length=200),
                ),
            ]
        ),
    ]
