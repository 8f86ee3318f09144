"""Celery closes Django's connection around every task unless CELERY_DB_REUSE_MAX is set in its own
configuration; a worker here keeps one connection per pool process (counted in pg_stat_activity)."""
import pytest
from django.conf import settings

from lifecycle.models import Requirement
from tests.conftest import api_for
from tests.flows import SAMPLE
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _state(pk: str) -> str:
    return Requirement.objects.get(pk=pk).state


def test_the_worker_reuses_its_database_connections_across_tasks(start_worker, alice, rita):
    from django.db import connection

    start_worker("reuse", concurrency=2, llm_pool="prefork", AITEAM_WORKSPACE_ROOT=str(settings.AITEAM_WORKSPACE_ROOT))
    pk = api_for(alice).post("/api/v1/requirements/", {"brief": SAMPLE}, format="json").data["id"]
    wait_for(lambda: _state(pk) == "user_stories_created", what="stories")
    task = api_for(rita).get(f"/api/v1/review-tasks/{Requirement.objects.get(pk=pk).review_tasks.get().pk}/").data
    api_for(rita).post(f"/api/v1/review-tasks/{task['id']}/decision/",
                       {"decision": "approve", "stories_version": task["stories_version"]}, format="json")
    wait_for(lambda: _state(pk) == "ready_to_deploy", what="design, code, QC and DevOps", timeout=120)
    steps = Requirement.objects.get(pk=pk).steps.filter(state="done").order_by("started_at")
    first_by_process = {}
    for step in steps:
        first_by_process.setdefault(step.worker, step.started_at)

    def connections() -> list:
        with connection.cursor() as cursor:
            cursor.execute("SELECT backend_start FROM pg_stat_activity WHERE application_name = 'aiteam-worker-reuse'")
            return sorted(row[0] for row in cursor.fetchall())

    # a lease heartbeat that renewed a long step has its own connection until its next beat finds nothing running
    # (AITEAM_STEP_LEASE_S 11: a beat every 3.7 s), then closes it
    wait_for(lambda: len(connections()) <= 2, what="the heartbeat's connection closed", timeout=15)
    starts = connections()
    assert steps.count() >= 12 and len(first_by_process) == 2
    assert len(starts) == 2  # one connection per pool process, not one per task
    # each process's connection was opened for its first step and kept for every later one
    assert all(start < first for start, first in zip(starts, sorted(first_by_process.values()), strict=True))
