# Tasks that exist when this runs may already have push configs or gateway deliveries:
# they start watched (their receivers look, as before); new tasks start unwatched.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a", "0007_task_state_deadline_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="watched",
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name="task",
            name="watched",
            field=models.BooleanField(default=False),
        ),
    ]
