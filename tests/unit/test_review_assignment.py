"""Claim, unassign, assign: services that check the reviewer permission, audit where they came from, and notify."""
import pytest
from django.contrib.auth.models import Group
from django.core import mail

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import OutboxEvent, StateTransition
from lifecycle.services.assignment import (
    assignable_groups,
    assignable_users,
    review_assign,
    review_claim,
    review_unassign,
)
from tests.conftest import api_for
from tests.factories import MembershipFactory
from tests.flows import decide
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = {"ip": "10.1.2.3", "user_agent": "pytest"}


def as_admin(user):
    return Actor.human(user, "admin")


@pytest.fixture
def rosa(acme):
    return MembershipFactory(organization=acme, role="reviewer", user__username="rosa", user__email="rosa@acme.test").user


def test_a_reviewer_claims_a_task_and_the_claim_is_audited(acme_project, rita):
    task = open_review(acme_project)
    review_claim(task_id=task.pk, actor=as_admin(rita), origin=ORIGIN)
    task.refresh_from_db()
    assert (task.state, task.assignee) == ("claimed", rita)
    row = StateTransition.objects.get(subject="review_task", subject_id=str(task.pk), event="claim")
    assert (row.actor_user, row.via, row.metadata["origin"]["ip"], row.metadata["assignee"]) == (
        rita, "admin", "10.1.2.3", "rita")


def test_claiming_a_task_someone_else_holds_is_refused(acme_project, rita, rosa):
    task = open_review(acme_project)
    review_claim(task_id=task.pk, actor=as_admin(rita))
    with pytest.raises(IllegalTransition, match="rita is working on this task"):
        review_claim(task_id=task.pk, actor=as_admin(rosa))
    review_claim(task_id=task.pk, actor=as_admin(rita))  # claiming your own task again changes nothing
    assert StateTransition.objects.filter(subject_id=str(task.pk), event="claim").count() == 1


def test_a_member_without_the_reviewer_role_may_not_claim(acme_project, sam):
    task = open_review(acme_project)
    with pytest.raises(NotPermitted, match="no reviewer role"):
        review_claim(task_id=task.pk, actor=as_admin(sam))


def test_unassign_returns_the_task_to_the_pool(acme_project, rita, rosa):
    task = open_review(acme_project)
    review_claim(task_id=task.pk, actor=as_admin(rita))
    review_unassign(task_id=task.pk, actor=as_admin(rosa))
    task.refresh_from_db()
    assert (task.state, task.assignee, task.assignee_group) == ("open", None, None)
    assert StateTransition.objects.get(subject_id=str(task.pk), event="unclaim").metadata["previous"] == "rita"


def test_assigning_to_a_reviewer_notifies_them_but_claiming_does_not(acme_project, rita, rosa):
    task = open_review(acme_project)
    mail.outbox.clear()
    review_assign(task_id=task.pk, actor=as_admin(rita), user=rosa)
    task.refresh_from_db()
    assert (task.state, task.assignee) == ("claimed", rosa)
    assert [(m.subject.split(":")[0], m.to) for m in mail.outbox] == [("Assigned to you", ["rosa@acme.test"])]
    mail.outbox.clear()
    review_unassign(task_id=task.pk, actor=as_admin(rosa))
    review_claim(task_id=task.pk, actor=as_admin(rosa))
    assert mail.outbox == []


def test_only_someone_who_may_decide_can_be_assigned(acme_project, rita, sam, oscar):
    task = open_review(acme_project)
    for outsider in (sam, oscar):
        with pytest.raises(DomainError, match="cannot assign"):
            review_assign(task_id=task.pk, actor=as_admin(rita), user=outsider)
    assert [u.username for u in assignable_users(task)] == ["rita"]


def test_handing_a_task_to_a_group(acme_project, rita):
    group = Group.objects.create(name="reviewers-web")
    rita.groups.add(group)
    task = open_review(acme_project)
    review_claim(task_id=task.pk, actor=as_admin(rita))
    review_assign(task_id=task.pk, actor=as_admin(rita), group=group)
    task.refresh_from_db()
    assert (task.state, task.assignee, task.assignee_group) == ("open", None, group)
    shown = api_for(rita).get(f"/api/v1/review-tasks/{task.pk}/").json()
    assert (shown["assignee"], shown["assignee_group"], shown["escalation_policy"]) == (None, "reviewers-web", "remind")
    assert shown["decide_by"] and shown["policy"]["default_decision"] == "reject"


def test_only_a_group_with_a_member_who_may_decide_can_be_handed_the_task(acme_project, rita, rosa, sam, oscar):
    groups = {name: Group.objects.create(name=name) for name in ("web", "sales", "globex-team", "empty")}
    rosa.groups.add(groups["web"])
    sam.groups.add(groups["sales"])  # a submitter: may read, not decide
    oscar.groups.add(groups["globex-team"])  # a reviewer, of another organization
    task = open_review(acme_project)
    assert [g.name for g in assignable_groups(task)] == ["web"]
    for name in ("sales", "globex-team", "empty"):
        with pytest.raises(DomainError, match=f"cannot assign: no member of '{name}' may decide review tasks of Acme"):
            review_assign(task_id=task.pk, actor=as_admin(rita), group=groups[name])
    review_assign(task_id=task.pk, actor=as_admin(rita), group=groups["web"])
    task.refresh_from_db()
    assert task.assignee_group == groups["web"]


def test_a_project_narrowed_to_one_group_offers_groups_of_that_groups_members_or_admins(acme_project, rita, rosa):
    web, other, bosses = (Group.objects.create(name=name) for name in ("web-reviewers", "other", "bosses"))
    rosa.groups.add(web)
    rita.groups.add(other)  # a reviewer, but not in the project's reviewers group
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="boss").user.groups.add(bosses)
    acme_project.settings = {"reviewers_group": "web-reviewers"}
    acme_project.save()
    task = open_review(acme_project)
    assert [g.name for g in assignable_groups(task)] == ["bosses", "web-reviewers"]
    with pytest.raises(DomainError, match="no member of 'other'"):
        review_assign(task_id=task.pk, actor=as_admin(rosa), group=other)


def test_assigning_to_whoever_already_has_the_task_changes_nothing(acme_project, rita, rosa):
    group = Group.objects.create(name="web")
    rosa.groups.add(group)
    task = open_review(acme_project)
    for _ in range(2):
        review_assign(task_id=task.pk, actor=as_admin(rita), user=rosa)
    for _ in range(2):
        review_assign(task_id=task.pk, actor=as_admin(rita), group=group)
    audit = StateTransition.objects.filter(subject="review_task", subject_id=str(task.pk))
    assert list(audit.filter(event__in=["assign", "hand_to_group"]).values_list("event", flat=True)) == [
        "assign", "hand_to_group"]
    assert OutboxEvent.objects.filter(requirement=task.requirement, name="ReviewTaskAssigned").count() == 2


def test_an_escalated_task_stays_escalated_when_assigned(acme_project, rita, rosa):
    task = open_review(acme_project)
    type(task).objects.filter(pk=task.pk).update(state="escalated")
    review_assign(task_id=task.pk, actor=as_admin(rita), user=rosa)
    task.refresh_from_db()
    assert (task.state, task.assignee) == ("escalated", rosa)


def test_decided_tasks_cannot_be_claimed(acme_project, rita):
    task = open_review(acme_project, kind="clarification")
    decide(task, rita, "reject", reason="out of scope")
    with pytest.raises(IllegalTransition, match="already resolved"):
        review_claim(task_id=task.pk, actor=as_admin(rita))


def test_a_project_can_narrow_deciding_to_one_group(acme_project, rita, rosa):
    group = Group.objects.create(name="web-reviewers")
    rosa.groups.add(group)
    acme_project.settings = {"reviewers_group": "web-reviewers"}
    acme_project.save()
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="boss")  # admins stay allowed
    task = open_review(acme_project, kind="clarification")

    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": "answer", "answer": "x"},
                                  format="json")
    assert response.status_code == 403 and "web-reviewers" in response.json()["detail"]
    assert sorted(u.username for u in assignable_users(task)) == ["boss", "rosa"]
    response = api_for(rosa).post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": "answer", "answer": "x"},
                                  format="json", HTTP_USER_AGENT="curl/8", REMOTE_ADDR="10.9.8.7")
    assert response.status_code == 200
    resolve = StateTransition.objects.get(subject_id=str(task.pk), event="resolve")
    assert (resolve.actor_user, resolve.via, resolve.metadata["origin"]["ip"]) == (rosa, "api", "10.9.8.7")


@pytest.mark.django_db(transaction=True)
def test_claim_and_unassign_over_the_api(alice, rita, sam, oscar):
    from tests.flows import pending, submit

    task = pending(submit(alice), "stories_approval")
    url = f"/api/v1/review-tasks/{task.pk}"
    claimed = api_for(rita).post(f"{url}/claim/")
    assert claimed.status_code == 200 and claimed.data["assignee"] == "rita" and claimed.data["state"] == "claimed"
    assert api_for(sam).post(f"{url}/claim/").status_code == 403  # a submitter may read but not review
    assert api_for(oscar).post(f"{url}/claim/").status_code == 404
    released = api_for(rita).post(f"{url}/unassign/")
    assert released.status_code == 200 and released.data["assignee"] is None and released.data["state"] == "open"


@pytest.mark.parametrize("action", ["claim", "unassign", "decision"])
def test_a_member_who_may_not_review_a_decided_task_is_told_so_not_that_it_is_decided(acme_project, rita, sam, action):
    """The permission first, the task's state after, on every route: sam may not review, whatever the state."""
    task = open_review(acme_project, kind="clarification")
    decide(task, rita, "answer", answer="everyone")
    response = api_for(sam).post(f"/api/v1/review-tasks/{task.pk}/{action}/", {"decision": "approve"}, format="json")
    assert response.status_code == 403, response.json()
    assert api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/{action}/", {"decision": "approve"},
                              format="json").status_code == 409


def test_the_state_filter_is_the_lists_and_leaves_a_task_by_id_alone(acme_project, rita):
    task = open_review(acme_project, kind="clarification")
    client = api_for(rita)
    assert client.get("/api/v1/review-tasks/?state=resolved").json()["results"] == []
    assert client.get("/api/v1/review-tasks/?state=nope").status_code == 400
    assert client.get(f"/api/v1/review-tasks/{task.pk}/?state=nope").json()["id"] == str(task.pk)
    claimed = client.post(f"/api/v1/review-tasks/{task.pk}/claim/?state=resolved")
    assert claimed.status_code == 200 and claimed.json()["state"] == "claimed"
    decided = client.post(f"/api/v1/review-tasks/{task.pk}/decision/?state=resolved", {"decision": "answer",
                                                                                      "answer": "x"}, format="json")
    assert decided.status_code == 200 and decided.json()["state"] == "resolved"
