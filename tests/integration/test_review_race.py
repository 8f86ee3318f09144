"""Two reviewers deciding the same task at the same moment on PostgreSQL: one wins, one gets 409."""
import threading

import pytest
from django.db import connection, transaction

from lifecycle.models import Requirement, StateTransition, UserStory
from lifecycle.services.reviews import review_open
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
    bodies = [{"decision": "approve"}, {"decision": "reject", "reason": "no"}]

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
