"""Task.anonymous: the tasks anonymous callers share, told apart from tasks whose user or
agent was deleted (both lose their creator)."""

from typing import Any

from django.db import migrations, models


def mark_anonymous(apps: Any, schema_editor: Any) -> None:
    """Tasks the A2A face created without a creator were anonymous callers' (or a deleted
    caller's: the rows cannot tell, so they stay reachable as before). REST tasks always
    had a user: without one, theirs was deleted."""
    Task = apps.get_model("a2a", "Task")
    Task.objects.filter(
        origin="a2a", created_by__isnull=True, created_by_agent__isnull=True
    ).update(anonymous=True)


class Migration(migrations.Migration):
    dependencies = [
        ("a2a", "0008_task_watched"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="anonymous",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_anonymous, migrations.RunPython.noop),
    ]
