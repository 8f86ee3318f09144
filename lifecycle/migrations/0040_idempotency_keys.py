"""Idempotency keys move from Requirement.idempotency_key to a table of their own, with the answer each got: a
keyed POST that found a ticket's live requirement is kept too, not only one that made a requirement (docs/api.md).
Each stored key is copied with its requirement and the digest of the submission it made, as
lifecycle.services.intake._submission_sha256 digests one (the requirement's fields are stored normalized)."""
import hashlib
import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def digest(requirement) -> str:
    stored = [requirement.brief, requirement.title, str(requirement.project_id), requirement.playbook,
              requirement.ticket_source, requirement.ticket_key]
    return hashlib.sha256(json.dumps(stored).encode()).hexdigest()


def keys_to_table(apps, schema_editor):
    Requirement, IdempotencyKey = apps.get_model("lifecycle", "Requirement"), apps.get_model("lifecycle", "IdempotencyKey")
    keyed = Requirement.objects.filter(idempotency_key__isnull=False, submitted_by__isnull=False)
    IdempotencyKey.objects.bulk_create(
        IdempotencyKey(user_id=r.submitted_by_id, key=r.idempotency_key, submission_sha256=digest(r), requirement=r)
        for r in keyed.iterator())


def keys_to_requirements(apps, schema_editor):
    """Back: the keys that made their requirement (one that found a live ticket has nowhere to go)."""
    Requirement, IdempotencyKey = apps.get_model("lifecycle", "Requirement"), apps.get_model("lifecycle", "IdempotencyKey")
    for row in IdempotencyKey.objects.filter(live=False, requirement__isnull=False).iterator():
        Requirement.objects.filter(pk=row.requirement_id, submitted_by_id=row.user_id).update(idempotency_key=row.key)


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0039_eval_hidden_error_suite_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='IdempotencyKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=255)),
                ('submission_sha256', models.CharField(help_text='the submission as stored, digested: the key sent again with another one is refused (422)', max_length=64)),
                ('live', models.BooleanField(default=False, help_text="the ticket's live requirement was found (200), not made")),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name='idempotencykey',
            name='requirement',
            field=models.ForeignKey(help_text='the answer (null only inside the transaction that writes the row)', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='idempotency_keys', to='lifecycle.requirement'),
        ),
        migrations.AddField(
            model_name='idempotencykey',
            name='user',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name='idempotencykey',
            constraint=models.UniqueConstraint(fields=('user', 'key'), name='one_answer_per_idempotency_key'),
        ),
        migrations.RunPython(keys_to_table, keys_to_requirements),
        migrations.RemoveConstraint(
            model_name='requirement',
            name='one_requirement_per_idempotency_key',
        ),
        migrations.RemoveField(
            model_name='requirement',
            name='idempotency_key',
        ),
    ]
