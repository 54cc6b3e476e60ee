"""An agent's caller salt (AgentProfile.caller_salt): a value no later agent repeats.

The column is added without a default: a callable default on AddField is evaluated once,
and every existing agent would get the SAME salt. So the agents registered before keep
NULL, and their caller tags (a2a.face.ids.tag_for), with the conversations they started
at other agents, stay as they were; the model's default (uuid4, in Python) fills it for
the agents created from now on.
"""

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_profiles", "0009_card_source_url_text"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AddField(
                    model_name="agentprofile",
                    name="caller_salt",
                    field=models.UUIDField(editable=False, null=True),
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="agentprofile",
                    name="caller_salt",
                    field=models.UUIDField(default=uuid.uuid4, editable=False, null=True),
                ),
            ],
        ),
    ]
