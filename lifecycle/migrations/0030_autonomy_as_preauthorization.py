"""A project's opt-in to autonomous deployments becomes its pre-authorization of deployment_approval:approve
(ADR 36): each project opted in gets that row (granted_by unknown, so null), then the field goes."""

from django.db import migrations

APPROVE_DEPLOYMENT = "deployment_approval:approve"


def opt_ins_to_rows(apps, schema_editor):
    Project = apps.get_model("lifecycle", "Project")
    ActionPreauthorization = apps.get_model("lifecycle", "ActionPreauthorization")
    for project_id in Project.objects.filter(autonomous_deployments=True).values_list("pk", flat=True):
        ActionPreauthorization.objects.get_or_create(project_id=project_id, action=APPROVE_DEPLOYMENT)


def rows_to_opt_ins(apps, schema_editor):
    Project = apps.get_model("lifecycle", "Project")
    ActionPreauthorization = apps.get_model("lifecycle", "ActionPreauthorization")
    granted = ActionPreauthorization.objects.filter(action=APPROVE_DEPLOYMENT).values("project_id")
    Project.objects.filter(pk__in=granted).update(autonomous_deployments=True)


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0029_evals"),
    ]

    operations = [
        migrations.RunPython(opt_ins_to_rows, rows_to_opt_ins),
        migrations.RemoveField(model_name="project", name="autonomous_deployments"),
    ]
