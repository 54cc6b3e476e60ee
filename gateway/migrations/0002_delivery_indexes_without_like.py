"""Delivery indexes without PostgreSQL's "_like" twins (see
:mod:`platform_site.migration_ops`): the status index is kept as ``delivery_status``;
the agent's own index goes, since ``delivery_outbox`` (agent, status, created_at) leads
with the agent."""

import django.db.models.deletion
from django.db import migrations, models

from platform_site.migration_ops import plain_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("agent_profiles", "0006_agent_listing_flag"),
        ("gateway", "0001_deliveries_presence_offline"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="delivery",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="agent_profiles.agentprofile",
                    ),
                ),
                migrations.AlterField(
                    model_name="delivery",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("pending", "Pending (agent offline)"),
                            ("sent", "Sent, waiting for the ack"),
                            ("acked", "Acknowledged"),
                            ("canceled", "Canceled"),
                            ("expired", "Expired"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                migrations.AddIndex(
                    model_name="delivery",
                    index=models.Index(fields=["status"], name="delivery_status"),
                ),
            ],
            database_operations=[
                plain_indexes(
                    "gateway_delivery",
                    {"status": ("gateway_delivery_status_51d832f7", "delivery_status")},
                    dropped={"agent_id": "gateway_delivery_agent_id_9b67c7f1"},
                )
            ],
        ),
    ]
