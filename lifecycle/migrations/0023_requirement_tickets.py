"""Tickets on requirements (source, key, URL; one live requirement per ticket) and the webhook deliveries that
made or found one (one row per delivery id, so a repeat does nothing)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0022_project_repository'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(choices=[('github', 'github'), ('gitlab', 'gitlab'), ('jira', 'jira')], max_length=10)),
                ('delivery_id', models.CharField(help_text="X-GitHub-Delivery, GitLab's Idempotency-Key or event UUID, X-Atlassian-Webhook-Identifier", max_length=200)),
                ('event', models.CharField(help_text='what it reported, e.g. issues.labeled', max_length=100)),
                ('started_run', models.BooleanField(help_text='false: the ticket already had a live requirement')),
                ('received_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name='requirement',
            name='ticket_key',
            field=models.CharField(blank=True, editable=False, help_text='e.g. #42 or PROJ-7', max_length=100),
        ),
        migrations.AddField(
            model_name='requirement',
            name='ticket_source',
            field=models.CharField(blank=True, choices=[('api', 'Api'), ('github', 'Github'), ('gitlab', 'Gitlab'), ('jira', 'Jira'), ('cli', 'Cli')], editable=False, help_text='where the ticket came from; empty: a brief, not a ticket', max_length=10),
        ),
        migrations.AddField(
            model_name='requirement',
            name='ticket_url',
            field=models.URLField(blank=True, editable=False, max_length=500),
        ),
        migrations.AddConstraint(
            model_name='requirement',
            constraint=models.UniqueConstraint(condition=models.Q(('state__in', ['received', 'clarified', 'user_stories_created', 'design_ready', 'in_development', 'in_review', 'test_pending', 'ready_to_deploy', 'blocked', 'escalated']), ('ticket_key__gt', '')), fields=('project', 'ticket_source', 'ticket_key'), name='one_live_requirement_per_ticket'),
        ),
        migrations.AddField(
            model_name='webhookdelivery',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_deliveries', to='lifecycle.project'),
        ),
        migrations.AddField(
            model_name='webhookdelivery',
            name='requirement',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='webhook_deliveries', to='lifecycle.requirement'),
        ),
        migrations.AddConstraint(
            model_name='webhookdelivery',
            constraint=models.UniqueConstraint(fields=('project', 'source', 'delivery_id'), name='one_row_per_webhook_delivery'),
        ),
    ]
