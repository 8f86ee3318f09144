"""The SLA sweep runs every minute from a django-celery-beat PeriodicTask that the admin edits and beat keeps."""
import pytest
from django.conf import settings
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from aiteam.celery import app
from lifecycle.tasks import sweep_review_slas
from tests.review_tasks import age, open_review

SWEEP = "every-minute-sweep-review-slas"


@pytest.fixture(autouse=True)
def _beat_keeps_the_tests_connection(monkeypatch):
    """A beat closes connections it finds in a transaction before it reads the schedule; here that transaction is
    the test's, and on PostgreSQL closing the connection would end it (SQLite's in-memory database ignores it)."""
    monkeypatch.setattr("django_celery_beat.schedulers.close_old_connections", lambda: None)


@pytest.mark.django_db
def test_the_sweep_is_a_periodic_task_that_beat_schedules_every_minute():
    task = PeriodicTask.objects.get(name=SWEEP)
    assert (task.task, task.interval.every, task.interval.period, task.enabled) == (
        "lifecycle.tasks.sweep_review_slas", 1, "minutes", True)
    assert task.task in app.tasks
    assert SWEEP in DatabaseScheduler(app=app).schedule


@pytest.mark.django_db
def test_an_interval_edited_in_the_admin_survives_a_beat_restart():
    task = PeriodicTask.objects.get(name=SWEEP)
    task.interval = IntervalSchedule.objects.create(every=5, period="minutes")
    task.save()
    DatabaseScheduler(app=app)  # a starting beat syncs CELERY_BEAT_SCHEDULE into the table
    assert PeriodicTask.objects.get(name=SWEEP).interval.every == 5
    assert SWEEP not in settings.CELERY_BEAT_SCHEDULE  # which is why the sweep is not listed there


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_runs_the_sweep(acme_project, rita):
    age(open_review(acme_project), hours=25)
    assert sweep_review_slas() == {"remind": 1}
    assert sweep_review_slas() == {}
