"""The SLA sweeper applies each task's policy once when it is due, keeps reminding, and finally decides by policy."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lifecycle.errors import DomainError
from lifecycle.models import ReviewTask, StateTransition
from lifecycle.services import sla
from lifecycle.services.sla import review_sweep
from tests.factories import MembershipFactory, UserFactory
from tests.review_tasks import age, open_review

pytestmark = pytest.mark.django_db(transaction=True)


def audit(task, event):
    return StateTransition.objects.filter(subject="review_task", subject_id=str(task.pk), event=event)


def with_policy(project, kind, **policy):
    project.settings = {**project.settings, "review_policies": {kind: policy}}
    project.save()


@pytest.fixture
def rita_with_mail(rita):
    rita.email = "rita@acme.test"
    rita.save()
    return rita


def test_it_reminds_exactly_the_overdue_tasks_once(acme_project, rita_with_mail):
    overdue = [age(open_review(acme_project, title=f"late {i}"), hours=25) for i in range(3)]
    on_time = [age(open_review(acme_project, title=f"fresh {i}"), hours=23) for i in range(2)]
    mail.outbox.clear()

    assert review_sweep() == {"remind": 3}
    assert review_sweep() == {}  # nothing is due again until the next reminder

    for task in overdue:
        row = audit(task, "remind").get()
        assert (row.actor_role, row.via, row.from_state, row.to_state) == ("sla_policy", "policy", "open", "open")
        task.refresh_from_db()
        assert task.escalation_count == 1 and task.next_sweep_at > timezone.now() + timedelta(hours=3)
    assert not StateTransition.objects.filter(subject_id__in=[str(t.pk) for t in on_time]).exclude(event="").exists()
    assert sorted(m.subject for m in mail.outbox if m.subject.startswith("Reminder")) == sorted(
        f"Reminder: Stories Approval for late {i} is overdue" for i in range(3))


def test_it_keeps_reminding_every_interval_then_decides_by_policy_at_the_limit(acme_project, rita):
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="ada",
                      user__email="ada@acme.test")
    with_policy(acme_project, "clarification", sla_hours=2, remind_every_hours=1, decide_after_hours=4,
                default_reason="Unanswered briefs are closed.")
    task = open_review(acme_project, kind="clarification")
    now = timezone.now()
    actions = [review_sweep(now=now + timedelta(hours=h, minutes=1)) for h in (1, 2, 3, 4)]
    assert actions == [{}, {"remind": 1}, {"remind": 1}, {"auto_decide": 1}]

    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by, task.decided_by_policy, task.decided_via) == (
        "resolved", "reject", None, "sla_policy", "policy")
    assert "No reviewer decided within 4 h" in task.reason and "Unanswered briefs are closed." in task.reason
    assert task.requirement.state == "cancelled"  # a rejected clarification cancels: the run does not wait forever
    told = [m for m in mail.outbox if m.subject.startswith("Decided by policy")]
    assert [m.to for m in told] == [["ada@acme.test"]] and "Unanswered briefs are closed." in told[0].body
    resolve = audit(task, "resolve").get()
    assert (resolve.actor_user, resolve.actor_role, resolve.via) == (None, "sla_policy", "policy")
    assert review_sweep(now=now + timedelta(days=30)) == {}


def test_escalation_hands_the_task_to_the_named_manager(acme_project, rita):
    maria = MembershipFactory(organization=acme_project.organization, role="admin",
                              user__username="maria", user__email="maria@acme.test").user
    with_policy(acme_project, "stories_approval", action="escalate", manager="maria")
    task = age(open_review(acme_project), hours=25)
    mail.outbox.clear()

    assert review_sweep() == {"escalate": 1}
    task.refresh_from_db()
    assert (task.state, task.assignee, task.escalation_count) == ("escalated", maria, 1)
    assert task.escalated_at is not None
    row = audit(task, "escalate").get()
    assert (row.from_state, row.to_state, row.metadata["manager"]) == ("open", "escalated", "maria")
    assert [m.to for m in mail.outbox if m.subject.startswith("Escalated")] == [["maria@acme.test"]]


def test_escalation_without_a_valid_manager_tells_the_organizations_admins(acme_project, rita):
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="ada",
                      user__email="ada@acme.test")
    UserFactory(username="outsider", email="out@else.test")
    with_policy(acme_project, "stories_approval", action="escalate", manager="outsider")
    task = age(open_review(acme_project), hours=25)
    mail.outbox.clear()

    review_sweep()
    task.refresh_from_db()
    assert (task.state, task.assignee) == ("escalated", None)
    assert [m.to for m in mail.outbox if m.subject.startswith("Escalated")] == [["ada@acme.test"]]


def test_escalation_to_a_manager_who_may_not_decide_the_project_goes_to_everyone_who_may(acme_project, rita_with_mail):
    web = Group.objects.create(name="web")
    rita_with_mail.groups.add(web)
    maria = MembershipFactory(organization=acme_project.organization, role="reviewer", user__username="maria",
                              user__email="maria@acme.test").user  # a reviewer, but not in the project's group
    acme_project.settings = {**acme_project.settings, "reviewers_group": "web"}
    with_policy(acme_project, "stories_approval", action="escalate", manager="maria")
    task = age(open_review(acme_project), hours=25)
    ReviewTask.objects.filter(pk=task.pk).update(assignee=maria, state="claimed")
    mail.outbox.clear()

    assert review_sweep() == {"escalate": 1}
    task.refresh_from_db()
    assert (task.state, task.assignee, task.assignee_group) == ("escalated", None, None)
    row = audit(task, "escalate").get()
    assert row.metadata["manager"] == "everyone who may decide it"
    assert "maria is not in 'web'" in row.metadata["fallback"]
    escalated = [m for m in mail.outbox if m.subject.startswith("Escalated")]
    assert [m.to for m in escalated] == [["rita@acme.test"]]
    assert "everyone who may decide it" in escalated[0].body

    mail.outbox.clear()
    review_sweep(now=timezone.now() + timedelta(hours=4, minutes=1))
    assert [m.to for m in mail.outbox] == [["rita@acme.test"]]  # the reminders too


def test_reassignment_to_a_group_with_nobody_who_may_decide_goes_to_everyone_who_may(acme_project, rita_with_mail,
                                                                                      sam):
    ops = Group.objects.create(name="ops")
    sam.groups.add(ops)  # a submitter: may not decide
    sam.email = "sam@acme.test"
    sam.save()
    with_policy(acme_project, "stories_approval", action="reassign", group="ops")
    task = age(open_review(acme_project), hours=25)
    mail.outbox.clear()

    assert review_sweep() == {"reassign": 1}
    task.refresh_from_db()
    assert (task.state, task.assignee, task.assignee_group) == ("open", None, None)
    row = audit(task, "hand_to_group").get()
    assert row.metadata["group"] == "everyone who may decide it" and "ops" in row.metadata["fallback"]
    assert [m.to for m in mail.outbox] == [["rita@acme.test"]]
    assert "everyone who may decide it" in mail.outbox[0].body


def test_reassignment_hands_the_task_to_the_group(acme_project, rita):
    group = Group.objects.create(name="night-shift")
    nina = MembershipFactory(organization=acme_project.organization, role="reviewer", user__username="nina",
                             user__email="nina@acme.test").user
    nina.groups.add(group)
    with_policy(acme_project, "stories_approval", action="reassign", group="night-shift")
    task = age(open_review(acme_project), hours=25)
    ReviewTask.objects.filter(pk=task.pk).update(assignee=rita, state="claimed")
    mail.outbox.clear()

    assert review_sweep() == {"reassign": 1}
    task.refresh_from_db()
    assert (task.state, task.assignee, task.assignee_group) == ("open", None, group)
    assert audit(task, "hand_to_group").get().metadata["previous"] == "rita"
    assert [m.to for m in mail.outbox] == [["nina@acme.test"]]


def test_auto_decide_policy_decides_at_the_sla(acme_project, rita):
    with_policy(acme_project, "step_failed", action="auto_decide", sla_hours=1)
    task = open_review(acme_project, kind="step_failed", context={"step_id": 0})
    assert task.decide_by == task.sla_deadline
    assert review_sweep(now=task.sla_deadline + timedelta(seconds=1)) == {"auto_decide": 1}
    task.refresh_from_db()
    assert (task.decision, task.decided_by_policy) == ("reject", "sla_policy")


def test_a_default_the_flow_refuses_is_logged_and_the_task_reminded_instead(acme_project, rita, caplog, monkeypatch):
    def refused(**_):
        raise DomainError("the requirement cannot take that decision now", "decision")
    monkeypatch.setattr(sla, "review_decide", refused)
    task = age(open_review(acme_project, kind="clarification"), hours=100)

    assert review_sweep() == {"remind": 1}
    task.refresh_from_db()
    assert task.is_pending and task.next_sweep_at > timezone.now()
    assert "could not decide" in caplog.text


def test_a_default_the_task_does_not_offer_gives_way_to_reject(acme_project, rita):
    task = open_review(acme_project, kind="clarification")
    ReviewTask.objects.filter(pk=task.pk).update(policy={**task.policy, "default_decision": "approve"})
    task = age(task, hours=100)

    assert review_sweep() == {"auto_decide": 1}
    task.refresh_from_db()
    assert (task.decision, task.decided_by_policy) == ("reject", "sla_policy")
    assert "could not apply its stated default, approve (not an option for this task)" in task.reason


def test_one_broken_task_does_not_stop_the_sweep(acme_project, rita, monkeypatch):
    broken, fine = (age(open_review(acme_project, title=t), hours=25) for t in ("broken", "fine"))
    real = sla.ACTIONS["remind"]

    def remind(task, policy, now):
        if task.pk == broken.pk:
            raise RuntimeError("boom")
        return real(task, policy, now)

    monkeypatch.setitem(sla.ACTIONS, "remind", remind)
    assert review_sweep() == {"failed": 1, "remind": 1}
    broken.refresh_from_db()
    assert broken.escalation_count == 0 and broken.next_sweep_at > timezone.now() + timedelta(minutes=10)


def test_the_sweep_reads_only_due_tasks_with_one_query(acme_project, rita):
    for i in range(5):
        open_review(acme_project, title=f"fresh {i}")
    with CaptureQueriesContext(connection) as queries:
        assert review_sweep() == {}
    assert len(queries) == 1
    sql = queries[0]["sql"]
    assert '"next_sweep_at" <=' in sql and '"state" IN' in sql and "LIMIT 1000" in sql


def test_resolved_tasks_are_never_swept(acme_project, rita):
    task = age(open_review(acme_project), hours=200)
    ReviewTask.objects.filter(pk=task.pk).update(state="resolved")
    assert review_sweep() == {}


def test_a_stated_policy_that_no_longer_validates_gives_way_to_the_projects_current_one(acme_project, rita, caplog):
    with_policy(acme_project, "stories_approval", remind_every_hours=2)
    task = age(open_review(acme_project), hours=25)
    ReviewTask.objects.filter(pk=task.pk).update(policy={**task.policy, "remind_every_hours": 1e9})  # stored long ago
    now = timezone.now()
    assert review_sweep(now=now) == {"remind": 1}
    task.refresh_from_db()
    assert task.next_sweep_at == now + timedelta(hours=2) and task.escalation_count == 1
    assert "no longer valid, using the project's current one" in caplog.text


# --- A deployment is never decided by policy: at its limit it is escalated and waits for a person.

def test_a_deployment_is_escalated_at_its_limit_and_reminded_never_decided(acme_project, rita):
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="ada",
                      user__email="ada@acme.test")
    night = MembershipFactory(organization=acme_project.organization, role="reviewer", user__username="nina").user
    night.groups.add(Group.objects.create(name="night-shift"))
    with_policy(acme_project, "deployment_approval", action="reassign", group="night-shift", sla_hours=1,
                remind_every_hours=1, decide_after_hours=3)
    task = open_review(acme_project, kind="deployment_approval")
    now = timezone.now()
    mail.outbox.clear()

    actions = [review_sweep(now=now + timedelta(hours=h, minutes=1)) for h in (1, 2, 3, 4, 30)]
    assert actions == [{"reassign": 1}, {"remind": 1}, {"escalate": 1}, {"remind": 1}, {"remind": 1}]
    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by_policy) == ("escalated", "", "")
    assert task.next_sweep_at > now + timedelta(hours=30)  # still swept: reminded until a person decides
    row = audit(task, "escalate").get()
    assert (row.from_state, row.to_state, row.metadata["manager"]) == ("open", "escalated", "organization admins")
    assert "the SLA policy never decides a Deployment Approval: it waits for a person" in row.metadata["limit"]
    assert [r.metadata.get("limit", "") != "" for r in audit(task, "remind").order_by("id")] == [False, True, True]
    escalated = [m for m in mail.outbox if m.subject.startswith("Escalated")]
    assert [m.to for m in escalated] == [["ada@acme.test"]]
    assert "the policy never decides a deployment approval" in escalated[0].body
    assert not [m for m in mail.outbox if m.subject.startswith("Decided by policy")]


def test_an_auto_decide_policy_escalates_a_deployment_at_the_sla_instead(acme_project, rita):
    with_policy(acme_project, "deployment_approval", action="auto_decide", sla_hours=1)
    task = open_review(acme_project, kind="deployment_approval")
    assert review_sweep(now=task.sla_deadline + timedelta(seconds=1)) == {"escalate": 1}
    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by_policy) == ("escalated", "", "")


def test_a_deployment_whose_stated_policy_gave_way_to_an_auto_decide_one_is_escalated_not_decided(acme_project, rita):
    """A task's stated policy that no longer validates gives way to the project's current one (task_policy): when
    that one says auto_decide, the sweep at the SLA still escalates a deployment, whatever its limit was."""
    task = open_review(acme_project, kind="deployment_approval")  # opened under the default remind policy
    ReviewTask.objects.filter(pk=task.pk).update(policy={"sla_hours": -1})  # stored before today's bounds
    with_policy(acme_project, "deployment_approval", action="auto_decide", sla_hours=1)
    assert review_sweep(now=task.sla_deadline + timedelta(seconds=1)) == {"escalate": 1}
    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by_policy) == ("escalated", "", "")


def test_the_review_page_says_a_deployment_waits_for_a_person_at_its_limit(acme_project, rita):
    from tests.conftest import staff_client

    deployment = open_review(acme_project, kind="deployment_approval")
    html = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{deployment.pk}/change/").content.decode()
    assert "never decides a deployment approval</b>; it waits for a person" in html
    assert "the policy will <b>" not in html
    stories = open_review(acme_project)
    html = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{stories.pk}/change/").content.decode()
    assert "the policy will <b>reject</b> it" in html  # the other kinds: as before
