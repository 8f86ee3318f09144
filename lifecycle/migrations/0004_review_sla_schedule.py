"""The SLA sweep as a django-celery-beat PeriodicTask, and SLA bookkeeping for tasks opened before policies.

The periodic tasks are created here (get_or_create, never overwritten) rather than listed in
CELERY_BEAT_SCHEDULE: the DatabaseScheduler update_or_creates settings entries on every start,
which would undo an interval changed or a task disabled in the admin.
"""
from datetime import timedelta

from django.db import migrations
from django.db.models import F

PENDING = ["open", "claimed", "escalated"]
SCHEDULES = [
    ("every-minute-sweep-review-slas", "lifecycle.tasks.sweep_review_slas",
     "Remind, reassign, escalate or decide by policy the review tasks past their SLA (lifecycle/services/sla.py)."),
    ("every-minute-requeue-due-notifications", "lifecycle.tasks.requeue_notifications",
     "Queue notifications whose retry is due or whose message was lost (lifecycle/notifications/delivery.py)."),
]


def create_schedules(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    for name, task, description in SCHEDULES:
        # expire_seconds: a sweep that waited a whole minute in the queue is replaced by the next one.
        PeriodicTask.objects.get_or_create(name=name, defaults={
            "task": task, "interval": every_minute, "expire_seconds": 55, "description": description})


def remove_schedules(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=[s[0] for s in SCHEDULES]).delete()


def backfill_sla(apps, schema_editor):
    """Tasks opened before SLA policies: swept from their deadline, decided by the default policy 48 h later."""
    ReviewTask = apps.get_model("lifecycle", "ReviewTask")
    ReviewTask.objects.filter(state__in=PENDING, next_sweep_at=None).update(
        next_sweep_at=F("sla_deadline"), decide_by=F("sla_deadline") + timedelta(hours=48))


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0003_review_inbox"),
        ("django_celery_beat", "0018_improve_crontab_helptext"),
    ]

    operations = [
        migrations.RunPython(create_schedules, remove_schedules),
        migrations.RunPython(backfill_sla, migrations.RunPython.noop),
    ]
