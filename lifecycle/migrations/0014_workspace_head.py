"""Requirement.workspace_head: the workspace commit the database knows. Existing requirements get the commit their
latest code or CI artifact recorded (every apply that commits stores one), so aligning their workspace keeps it."""
from django.db import migrations, models

COMMITTED_KINDS = ("source_file", "test_file", "ci_config")


def recorded_heads(apps, schema_editor):
    Artifact = apps.get_model("lifecycle", "Artifact")
    Requirement = apps.get_model("lifecycle", "Requirement")
    latest = {}
    for requirement_id, metadata in (Artifact.objects.filter(kind__in=COMMITTED_KINDS)
                                     .order_by("created_at", "id").values_list("requirement_id", "metadata")):
        if isinstance(metadata, dict) and metadata.get("commit"):
            latest[requirement_id] = metadata["commit"]
    for requirement_id, head in latest.items():
        Requirement.objects.filter(pk=requirement_id).update(workspace_head=head)


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0013_expect_one_row"),
    ]

    operations = [
        migrations.AddField(
            model_name="requirement",
            name="workspace_head",
            field=models.CharField(blank=True, default="", help_text="the workspace commit the last committed apply "
                                   "made; an apply whose transaction failed after its git commit is reset to it",
                                   max_length=40),
        ),
        migrations.RunPython(recorded_heads, migrations.RunPython.noop),
    ]
