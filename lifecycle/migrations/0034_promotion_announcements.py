"""A new promotion proposal is announced to the project's owners (ADR 39): PromotionProposed joins the events that
notify, so the partial index the beat's search for lost notifications uses covers it; a notification about a project
rather than a requirement names the project (whose webhook). Proposals relayed before this migration are marked as
notified when they were relayed: they were found in the admin then, and an upgrade announces none of them.

One open proposal per candidate (promotion_one_open_per_candidate, the 409's backstop): of the open proposals of the
same candidate against the same current version made before the check existed, the first waits on and the later ones
are closed as superseded, their reason naming the one that waits."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import F


def mark_relayed_proposals_as_notified(apps, schema_editor):
    OutboxEvent = apps.get_model("lifecycle", "OutboxEvent")
    OutboxEvent.objects.filter(notified_at=None, sent_at__isnull=False, name="PromotionProposed").update(
        notified_at=F("sent_at"))


def close_duplicate_proposals(apps, schema_editor):
    PromotionDecision = apps.get_model("lifecycle", "PromotionDecision")
    waiting = {}
    for row in PromotionDecision.objects.filter(state="proposed").order_by("created_at", "pk"):
        key = (row.project_id, row.artifact, row.candidate_version, row.current_version)
        if key not in waiting:
            waiting[key] = row.pk
            continue
        row.state, row.reason = "superseded", f"superseded: promotion {waiting[key]} proposes the same candidate"
        row.save(update_fields=["state", "reason"])


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0033_meta_eval_log'),
    ]

    operations = [
        migrations.RunPython(mark_relayed_proposals_as_notified, migrations.RunPython.noop),
        migrations.RunPython(close_duplicate_proposals, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='promotiondecision',
            constraint=models.UniqueConstraint(condition=models.Q(('state', 'proposed')), fields=('project', 'artifact', 'candidate_version', 'current_version'), name='promotion_one_open_per_candidate'),
        ),
        migrations.RemoveIndex(
            model_name='outboxevent',
            name='outbox_unnotified',
        ),
        migrations.AddIndex(
            model_name='outboxevent',
            index=models.Index(condition=models.Q(('name__in', ('ReviewTaskOpened', 'ReviewTaskReminded', 'ReviewTaskEscalated', 'ReviewTaskAssigned', 'ReviewTaskDecidedByPolicy', 'PromotionProposed')), ('notified_at', None), ('sent_at__isnull', False)), fields=['sent_at'], name='outbox_unnotified'),
        ),
        migrations.AddField(
            model_name='notification',
            name='project',
            field=models.ForeignKey(blank=True, help_text='for a notification about a project, not a requirement (a promotion to decide): whose webhook', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='lifecycle.project'),
        ),
    ]
