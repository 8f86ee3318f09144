"""When the beat may queue a lost notification (Notification.requeue_at) or a lost event's notifications
(OutboxEvent.notify_requeue_at) again: spaced by how long each has been lost, so a long queue is not flooded
with copies. Both nullable: adding them rewrites no row."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0016_outbox_notified_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='notification',
            name='requeue_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='notify_requeue_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
