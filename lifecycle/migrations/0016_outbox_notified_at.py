"""OutboxEvent.notified_at: when an event's notifications were worked out. Events that notify people and were
relayed before this migration are marked as notified when they were relayed (their notifications were queued
then), so the beat's search for events whose notifications were lost does not notify them all again. Only those
are updated (the other events are never searched), which keeps the table's lock short on a long outbox."""

from django.db import migrations, models
from django.db.models import F

NOTIFYING_EVENTS = ('ReviewTaskOpened', 'ReviewTaskReminded', 'ReviewTaskEscalated', 'ReviewTaskAssigned',
                    'ReviewTaskDecidedByPolicy')  # as of this migration


def mark_relayed_as_notified(apps, schema_editor):
    OutboxEvent = apps.get_model("lifecycle", "OutboxEvent")
    OutboxEvent.objects.filter(notified_at=None, sent_at__isnull=False, name__in=NOTIFYING_EVENTS).update(
        notified_at=F("sent_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0015_idempotency_key'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxevent',
            name='notified_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(mark_relayed_as_notified, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='outboxevent',
            index=models.Index(condition=models.Q(('name__in', ('ReviewTaskOpened', 'ReviewTaskReminded', 'ReviewTaskEscalated', 'ReviewTaskAssigned', 'ReviewTaskDecidedByPolicy')), ('notified_at', None), ('sent_at__isnull', False)), fields=['sent_at'], name='outbox_unnotified'),
        ),
    ]
