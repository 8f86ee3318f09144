# The meta-evaluation log (ADR 40): append-only entries of route accuracy, budget use, gate signals, loops,
# promotions.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0032_promotions'),
    ]

    operations = [
        migrations.CreateModel(
            name='MetaEvalLog',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('route', 'Route'), ('budget_use', 'Budget Use'), ('gate_signal', 'Gate Signal'), ('loops', 'Loops'), ('promotion', 'Promotion')], max_length=20)),
                ('role', models.CharField(blank=True, help_text='the role measured: routed to, budgeted, …', max_length=40)),
                ('playbook', models.CharField(blank=True, max_length=40)),
                ('data', models.JSONField(default=dict, help_text='the measure (docs/meta-eval.md)')),
                ('key', models.CharField(blank=True, max_length=120, null=True, unique=True)),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('organization', models.ForeignKey(blank=True, help_text="null: not one tenant's (e.g. a shared artifact)", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='lifecycle.organization')),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='lifecycle.project')),
                ('requirement', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='lifecycle.requirement')),
            ],
            options={
                'verbose_name': 'meta-evaluation entry',
                'verbose_name_plural': 'meta-evaluation log',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['kind', 'created_at'], name='meta_eval_kind_time'), models.Index(condition=models.Q(('organization__isnull', False)), fields=['organization', 'kind', 'created_at'], name='meta_eval_org_kind_time')],
            },
        ),
    ]
