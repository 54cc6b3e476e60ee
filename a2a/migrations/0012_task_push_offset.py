# The push webhook's serial (Task.push_serial: attempts + push_offset).

from django.db import migrations, models


class Migration(migrations.Migration):
    """``push_offset`` starts at 0 on every task: its webhook serial is then its attempt,
    the number of the addresses already given out, so agents that took a task before the
    upgrade go on pushing to it. From then on each retry or reassign raises it."""

    dependencies = [
        ("a2a", "0011_push_delivery_superseded"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="push_offset",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
