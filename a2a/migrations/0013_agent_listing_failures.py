# Failed and truncated listings in a row, per agent (AgentListing.failures / truncations).

from django.db import migrations, models


class Migration(migrations.Migration):
    """Both start at 0: a cursor has had no failed or truncated listing yet, as far as
    the upgrade knows. An agent whose listing keeps failing gets its tasks polled again
    after a few more; one whose listing never ends goes back to polling."""

    dependencies = [
        ("a2a", "0012_task_push_offset"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentlisting",
            name="failures",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="agentlisting",
            name="truncations",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
