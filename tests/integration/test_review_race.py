"""Two reviewers deciding the same task at the same moment on PostgreSQL: one wins, one gets 409."""
import threading

import pytest
from django.db import connection, transaction

from lifecycle.models import Requirement, ReviewTask, StateTransition, UserStory
from lifecycle.services.reviews import review_open
from lifecycle.services.story_edits import stories_version
from tests.conftest import api_for
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db(transaction=True)
RACES = 20


def stories_awaiting_review(project) -> str:
    with transaction.atomic():
        req = Requirement.objects.create(organization=project.organization, project=project, brief="b",
                                         state="user_stories_created", story_round=1)
        UserStory.objects.create(requirement=req, round=1, position=1, title="t", as_a="a", i_want="w", so_that="s",
                                 acceptance_criteria=["c"], priority="must", story_points=1)
        return str(review_open(req, kind="stories_approval", round=1, question="ok?").pk)


def race(task_id: str, users) -> list[int]:
    barrier, statuses = threading.Barrier(len(users)), []
    version = stories_version(ReviewTask.objects.get(pk=task_id))  # what both read before deciding
    bodies = [{"decision": "approve", "stories_version": version}, {"decision": "reject", "reason": "no"}]

    def decide(user, body):
        client = api_for(user)
        barrier.wait()
        try:
            statuses.append(client.post(f"/api/v1/review-tasks/{task_id}/decision/", body, format="json").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(u, b)) for u, b in zip(users, bodies, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return sorted(statuses)


def test_concurrent_decisions_one_wins_the_other_gets_409(acme_project, rita):
    rosa = MembershipFactory(organization=acme_project.organization, role="reviewer", user__username="rosa").user
    for user in (rita, rosa):
        api_for(user)  # create tokens before the race
    for _ in range(RACES):
        task_id = stories_awaiting_review(acme_project)
        assert race(task_id, [rita, rosa]) == [200, 409]
        audit = StateTransition.objects.filter(subject="review_task", subject_id=task_id)
        assert audit.count() == 1
        story_rows = StateTransition.objects.filter(subject="story", requirement__review_tasks__pk=task_id)
        assert story_rows.count() == 1


def test_a_claim_while_a_decision_holds_the_requirement_waits_and_neither_deadlocks(acme_project, rita):
    """The decider locks the requirement, then the task. A claim locks them in the same order, so it waits for
    the decision instead of taking the task first: locking the task alone, its audit row's foreign-key check at
    COMMIT waited for the requirement while the decider waited for the task, and PostgreSQL killed one of them."""
    from django.db import connections

    from lifecycle.actors import Actor
    from lifecycle.services.assignment import review_claim

    task_id = stories_awaiting_review(acme_project)
    requirement_id = ReviewTask.objects.values_list("requirement_id", flat=True).get(pk=task_id)
    decider = connections.create_connection("default")  # a second session, in the decider's place
    claimed, errors = [], []

    def claim():
        try:
            claimed.append(review_claim(task_id=task_id, actor=Actor.human(rita, via="api")).assignee_id)
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            errors.append(exc)
        finally:
            connection.close()

    try:
        with decider.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE", [requirement_id])
            claimer = threading.Thread(target=claim)
            claimer.start()
            claimer.join(timeout=0.5)
            assert claimer.is_alive()  # waiting for the requirement, holding nothing
            cursor.execute("SET LOCAL lock_timeout = '5s'")
            cursor.execute("SELECT 1 FROM lifecycle_reviewtask WHERE id = %s FOR UPDATE", [task_id])  # not held
            cursor.execute("COMMIT")
        claimer.join(timeout=10)
    finally:
        decider.close()
    assert errors == [] and claimed == [rita.pk]
