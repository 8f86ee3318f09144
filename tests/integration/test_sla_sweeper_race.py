"""Two SLA sweepers at once on PostgreSQL (two beats, or a beat and an operator): every overdue task is
escalated exactly once, the others are left alone, and the sweep finds its rows through the partial index."""
import threading
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from lifecycle.models import OutboxEvent, ReviewTask, StateTransition
from lifecycle.services.sla import review_sweep
from tests.factories import MembershipFactory
from tests.review_tasks import age, bulk_tasks, open_review

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS, OVERDUE, ON_TIME = 3, 12, 4


def sweep_concurrently(now, sweepers: int = 2) -> list[Counter]:
    barrier, results = threading.Barrier(sweepers), []

    def sweeper():
        barrier.wait()
        try:
            results.append(review_sweep(now=now))
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(sweepers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_two_sweepers_escalate_exactly_the_overdue_tasks_once(acme_project, rita):
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="maria")
    acme_project.settings = {"review_policies": {"stories_approval": {"action": "escalate", "manager": "maria"}}}
    acme_project.save()
    for round_ in range(ROUNDS):
        overdue = [age(open_review(acme_project, title=f"late {round_}.{i}"), hours=25) for i in range(OVERDUE)]
        on_time = [open_review(acme_project, title=f"fresh {round_}.{i}") for i in range(ON_TIME)]

        results = sweep_concurrently(timezone.now())

        assert sum(r["escalate"] for r in results) == OVERDUE and sum(sum(r.values()) for r in results) == OVERDUE
        for task in overdue:
            assert StateTransition.objects.filter(subject_id=str(task.pk), event="escalate").count() == 1
            assert OutboxEvent.objects.filter(name="ReviewTaskEscalated", payload__review_task=str(task.pk)).count() == 1
            task.refresh_from_db()
            assert (task.state, task.escalation_count, task.assignee.username) == ("escalated", 1, "maria")
        for task in on_time:
            task.refresh_from_db()
            assert (task.state, task.escalation_count) == ("open", 0)
            assert not StateTransition.objects.filter(subject_id=str(task.pk)).exists()
    assert not OutboxEvent.objects.filter(sent_at=None).exists()


def test_two_sweepers_auto_decide_a_task_once(acme_project, rita):
    acme_project.settings = {"review_policies": {"clarification": {"sla_hours": 1, "decide_after_hours": 2}}}
    acme_project.save()
    tasks = [age(open_review(acme_project, kind="clarification", title=f"vague {i}"), hours=3) for i in range(8)]

    results = sweep_concurrently(timezone.now())

    assert sum(r["auto_decide"] for r in results) == 8
    for task in tasks:
        assert StateTransition.objects.filter(subject_id=str(task.pk), event="resolve").count() == 1
        assert StateTransition.objects.filter(requirement_id=task.requirement_id, event="cancel").count() == 1


def test_the_sweep_query_uses_the_partial_index(acme_project, rita):
    bulk_tasks(acme_project, 20_000, overdue_every=100)
    ReviewTask.objects.filter(round__lte=5000).update(state="resolved")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE lifecycle_reviewtask")
    due = ReviewTask.objects.due_for_sweep(timezone.now()).order_by("next_sweep_at").values_list("pk", flat=True)
    plan = due[:1000].explain()
    assert "review_sweep_due" in plan, plan
    assert due.count() == 150


def test_the_sweep_passes_over_a_task_whose_requirement_is_held_and_takes_it_next_time(acme_project, rita):
    """A claim or a decision holds the requirement: the sweeper, which locks the requirement before the task
    like every writer, skips the task instead of holding it while it waits (a deadlock with that claim)."""
    from django.db import connections

    from lifecycle.services.sla import review_sweep_one

    task = age(open_review(acme_project, title="held"), hours=25)
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE", [task.requirement_id])
            assert review_sweep_one(task_id=task.pk, now=timezone.now()) is None
            cursor.execute("SET LOCAL lock_timeout = '5s'")
            cursor.execute("SELECT 1 FROM lifecycle_reviewtask WHERE id = %s FOR UPDATE", [task.pk])  # not held
            cursor.execute("COMMIT")
    finally:
        holder.close()
    assert ReviewTask.objects.get(pk=task.pk).escalation_count == 0
    assert review_sweep_one(task_id=task.pk, now=timezone.now()) == "remind"
