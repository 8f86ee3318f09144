"""Requirement.workspace_head: the workspace commit the last committed apply made. It starts empty ("not known"):
for a requirement that existed before, the workspace keeps its commits until an apply records one. The column
has a database default too, so a process still running the previous code can insert requirements; stop the
workers before migrating all the same, since their applies would commit without recording the head."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0013_expect_one_row"),
    ]

    operations = [
        migrations.AddField(
            model_name="requirement",
            name="workspace_head",
            field=models.CharField(blank=True, default="", db_default="", help_text="the workspace commit the last "
                                   "committed apply made; an apply whose transaction failed after its git commit is "
                                   "reset to it", max_length=40),
        ),
    ]
