"""AgentPause: an agent's Retry-After on a poll, kept for the agent (a new table: the
previous release, serving while this migrates, never reads it)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('a2a', '0014_database_defaults'),
        ('agent_profiles', '0011_database_defaults'),
    ]

    operations = [
        migrations.CreateModel(
            name='AgentPause',
            fields=[
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='agent_profiles.agentprofile')),
                ('until', models.DateTimeField(db_index=True)),
            ],
        ),
    ]
