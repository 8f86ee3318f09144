"""Requirement.idempotency_key: the Idempotency-Key header a POST /requirements/ came with, unique per submitter,
so that a client's retry of that POST gets the first requirement back instead of making a second. Existing
requirements have none (NULL: no constraint applies)."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0014_workspace_head'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='requirement',
            name='idempotency_key',
            field=models.CharField(blank=True, editable=False, help_text='the Idempotency-Key its POST came with: a repeat of that POST by the same user gets this requirement back instead of a second one', max_length=255, null=True),
        ),
        migrations.AddConstraint(
            model_name='requirement',
            constraint=models.UniqueConstraint(condition=models.Q(('idempotency_key__isnull', False)), fields=('submitted_by', 'idempotency_key'), name='one_requirement_per_idempotency_key'),
        ),
    ]
