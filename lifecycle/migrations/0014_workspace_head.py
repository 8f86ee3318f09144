"""Requirement.workspace_head: the workspace commit the last committed apply made. Requirements that existed
before get NULL, "not known": their workspace keeps its commits until an apply records one. New ones start at ""
(nothing committed yet), with a database default too, so a process still running the previous code can insert
requirements; stop the workers before migrating all the same, since their applies would commit without
recording the head."""
from django.db import migrations, models

HELP = ("the workspace commit the last committed apply made; an apply whose transaction failed after its git "
        "commit is reset to it")


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0013_expect_one_row"),
    ]

    operations = [
        migrations.AddField(
            model_name="requirement",
            name="workspace_head",
            field=models.CharField(blank=True, null=True, help_text=HELP, max_length=40),
        ),
        migrations.AlterField(
            model_name="requirement",
            name="workspace_head",
            field=models.CharField(blank=True, null=True, default="", db_default="", help_text=HELP, max_length=40),
        ),
    ]
