"""The review inbox in the admin: a landing list with filters, claim/assign, the review page with its pinned
context, decisions and clear refusals, inline story edits, bulk decisions, and a query count that does not grow
with the inbox."""
import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from lifecycle.contexts import business_analyst_context
from lifecycle.models import ActionPreauthorization, ReviewTask, StateTransition, StoryEdit
from lifecycle.replay.runs import replay_start
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.story_edits import stories_version, story_version
from tests.conftest import staff_client
from tests.factories import MembershipFactory
from tests.flows import decide, fresh, pending, submit
from tests.review_tasks import age, bulk_tasks, open_review

pytestmark = pytest.mark.django_db(transaction=True)
INBOX = "/admin/lifecycle/reviewtask/"
STORY_FIELDS = {"title": "ok title", "as_a": "a", "i_want": "w", "so_that": "s", "acceptance_criteria": "c",
                "priority": "must", "story_points": "5"}


def page(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200, response
    return response.content.decode()


@pytest.fixture
def rosa(acme):
    return MembershipFactory(organization=acme, role="reviewer", user__username="rosa").user


# --- The list: what it lands on, its filters and what it costs.

def test_the_inbox_lands_on_waiting_tasks_overdue_first(acme_project, rita):
    open_review(acme_project, title="Fresh one")
    age(open_review(acme_project, title="Late one"), hours=30)
    decided = open_review(acme_project, title="Done one", kind="clarification")
    ReviewTask.objects.filter(pk=decided.pk).update(state="resolved", decision="reject")

    html = page(staff_client(rita), INBOX)
    assert html.index("Late one") < html.index("Fresh one") and "Done one" not in html
    assert "overdue 6\xa0hours" in html and 'class="sla sla-breached"' in html
    assert "Done one" in page(staff_client(rita), INBOX + "?status=resolved")


def test_the_inbox_lists_only_the_reviewers_organizations_tasks(alice, rita, oscar):
    submit(alice)
    assert "Reading list" in page(staff_client(rita), INBOX)
    assert "Reading list" not in page(staff_client(oscar), INBOX)


@pytest.mark.parametrize("query,shown", [
    ("assigned=me", {"Mine"}), ("assigned=unassigned", {"Free", "Late"}), ("sla=overdue", {"Late"}),
    ("sla=escalated", {"Urgent"}), ("kind=clarification", {"Blocked"}), ("assigned=others", {"Urgent"}),
])
def test_each_filter_shows_only_its_tasks(acme_project, rita, rosa, query, shown):
    titles = {"Mine": {}, "Free": {}, "Late": {}, "Urgent": {}, "Blocked": {}}
    tasks = {t: open_review(acme_project, title=t, kind="clarification" if t == "Blocked" else "stories_approval")
             for t in titles}
    age(tasks["Late"], hours=30)
    ReviewTask.objects.filter(pk=tasks["Mine"].pk).update(assignee=rita, state="claimed")
    ReviewTask.objects.filter(pk=tasks["Urgent"].pk).update(assignee=rosa, state="escalated")
    ReviewTask.objects.filter(pk=tasks["Blocked"].pk).update(assignee_group=Group.objects.create(name="g"))

    html = page(staff_client(rita), f"{INBOX}?{query}")
    assert {t for t in titles if f">{t}<" in html} == shown


def test_the_project_filter_lists_only_the_users_projects(acme_project, rita, oscar):
    html = page(staff_client(rita), INBOX)
    assert "acme/default" in html and "globex/default" not in html


def test_the_quick_filters_show_how_many_tasks_each_holds(acme_project, rita):
    age(open_review(acme_project, title="a"), hours=30)
    open_review(acme_project, title="b")
    html = page(staff_client(rita), INBOX)
    assert 'Unassigned<span class="count">2</span>' in html and 'Overdue<span class="count">1</span>' in html


@pytest.mark.parametrize("query", ["project=abc", "status=bogus", "assigned=bogus", "sla=bogus"])
def test_a_filter_value_the_inbox_cannot_read_redirects_to_the_error_flag(acme_project, rita, query):
    open_review(acme_project, title="Waiting one")
    client = staff_client(rita)
    response = client.get(f"{INBOX}?{query}")
    assert (response.status_code, response["Location"]) == (302, f"{INBOX}?e=1")
    assert "Waiting one" in client.get(response["Location"]).content.decode()  # the default inbox


def test_the_by_policy_filter_shows_policy_decisions_even_from_the_pending_inbox(acme_project, rita):
    open_review(acme_project, title="Waiting one")
    by_policy, by_rita = open_review(acme_project, title="Timed out"), open_review(acme_project, title="Rita decided")
    ReviewTask.objects.filter(pk=by_policy.pk).update(state="resolved", decision="reject", decided_by_policy="sla_policy",
                                                      decided_via="policy")
    ReviewTask.objects.filter(pk=by_rita.pk).update(state="resolved", decision="approve", decided_by=rita)
    client = staff_client(rita)
    assert 'href="?sla=by_policy"' in client.get(INBOX).content.decode()  # the sidebar choice from the inbox
    html = client.get(f"{INBOX}?sla=by_policy").content.decode()
    assert ">Timed out<" in html and ">Rita decided<" not in html and ">Waiting one<" not in html
    assert ">Rita decided<" in client.get(f"{INBOX}?status=all").content.decode()
    assert ">Timed out<" not in client.get(f"{INBOX}?sla=by_policy&status=pending").content.decode()  # asked for


def test_the_sla_policy_filter_leaves_gates_approved_in_advance_to_their_own(acme_project, rita):
    ActionPreauthorization.objects.create(project=acme_project, action="stories_approval:approve")
    open_review(acme_project, title="Pre-authorized")
    timed_out = open_review(acme_project, kind="clarification", title="Timed out")
    ReviewTask.objects.filter(pk=timed_out.pk).update(state="resolved", decision="reject", decided_by_policy="sla_policy")
    client = staff_client(rita)
    html = client.get(f"{INBOX}?sla=by_policy").content.decode()
    assert ">Timed out<" in html and ">Pre-authorized<" not in html
    html = client.get(f"{INBOX}?sla=automatic").content.decode()
    assert ">Pre-authorized<" in html and ">Timed out<" not in html


@pytest.mark.parametrize("count", [10, 1000])
def test_the_inbox_costs_the_same_queries_for_10_or_1000_tasks(acme_project, rita, count,
                                                               django_assert_num_queries):
    bulk_tasks(acme_project, count, overdue_every=10)
    client = staff_client(rita)
    # session, user, membership (once), project filter, quick counts, page count, page rows, and the sidebar's
    # permission checks (user and group permissions, project admin), the header's unread count, the promotions the
    # person owns waiting for a decision: none of them grows with the tasks
    with django_assert_num_queries(12):
        response = client.get(INBOX)
    assert response.status_code == 200
    assert response.content.decode().count('class="action-select"') == min(count, 50)


# --- Claim and assign.

def test_a_reviewer_claims_from_the_list_and_returns_to_it(acme_project, rita):
    task = open_review(acme_project)
    client = staff_client(rita)
    assert f'formaction="{INBOX}{task.pk}/claim/"' in page(client, INBOX)
    response = client.post(f"{INBOX}{task.pk}/claim/", {"next": f"{INBOX}?assigned=me"})
    assert response.status_code == 302 and response["Location"] == f"{INBOX}?assigned=me"
    task.refresh_from_db()
    assert (task.state, task.assignee) == ("claimed", rita)
    assert f'formaction="{INBOX}{task.pk}/unassign/"' in page(client, INBOX)


def test_a_claim_never_redirects_off_the_site(acme_project, rita):
    task = open_review(acme_project)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/claim/", {"next": "https://evil.example/"})
    assert response["Location"] == f"{INBOX}{task.pk}/change/"


def test_an_action_url_refuses_get(acme_project, rita):
    task = open_review(acme_project)
    assert staff_client(rita).get(f"{INBOX}{task.pk}/claim/").status_code == 405


def test_a_task_is_assigned_to_a_reviewer_or_a_group_from_the_review_page(acme_project, rita, rosa):
    group = Group.objects.create(name="web")
    rosa.groups.add(group)
    task = open_review(acme_project)
    client = staff_client(rita)
    assert 'value="' + str(rosa.pk) + '">rosa</option>' in page(client, f"{INBOX}{task.pk}/change/")
    client.post(f"{INBOX}{task.pk}/assign/", {"user": rosa.pk})
    task.refresh_from_db()
    assert task.assignee == rosa
    client.post(f"{INBOX}{task.pk}/assign/", {"group": group.pk})
    task.refresh_from_db()
    assert (task.assignee, task.assignee_group) == (None, group)
    response = client.post(f"{INBOX}{task.pk}/assign/", {}, follow=True)
    assert "Choose a reviewer or a group" in response.content.decode()


def test_the_assign_form_offers_only_groups_with_a_member_who_may_decide(acme_project, rita, sam):
    web, sales = Group.objects.create(name="web"), Group.objects.create(name="sales")
    rita.groups.add(web)
    sam.groups.add(sales)
    task = open_review(acme_project)
    client = staff_client(rita)
    html = client.get(f"{INBOX}{task.pk}/change/").content.decode()
    assert f'value="{web.pk}">web</option>' in html and ">sales</option>" not in html
    response = client.post(f"{INBOX}{task.pk}/assign/", {"group": sales.pk}, follow=True)
    assert "Select a valid choice" in response.content.decode()
    task.refresh_from_db()
    assert task.assignee_group is None


# --- The review page.

def test_the_review_page_shows_the_stories_with_their_criteria_and_the_decision_options(alice, rita):
    task = pending(submit(alice), "stories_approval")
    html = page(staff_client(rita), f"{INBOX}{task.pk}/change/")
    assert "Refuse duplicate ISBNs" in html and "9780441013593" in html
    for option in ("approve", "reject", "request_changes"):
        assert f'value="{option}"' in html


def test_a_story_title_from_the_model_is_escaped_not_rendered(alice, rita, scripted):
    from tests.answers import BA_STORIES, PO_CLEAR

    hostile = {**BA_STORIES, "stories": [{**BA_STORIES["stories"][0], "title": "<script>alert(1)</script>"}]}
    scripted.enqueue(PO_CLEAR).enqueue(hostile)
    task = pending(submit(alice), "stories_approval")
    html = page(staff_client(rita), f"{INBOX}{task.pk}/change/")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_the_review_page_renders_the_pinned_context_for_a_human(acme_project, rita):
    task = open_review(acme_project, kind="escalation", reasoning="Two tests keep <b>failing</b>",
                       context={"attempts": 3, "failing_tests": ["tests/test_store.py::test_dup"],
                                "spec_summary": "A CLI reading list stored in JSON"})
    req = task.requirement
    artifact_store(req, kind="diff_summary", name="workspace", content=["A readinglist/store.py (+40 -0)",
                                                                       "M README.md (+3 -1)"])
    artifact_store(req, kind="test_report", name="self_test", summary="7 passed, 1 failed, 0 errors",
                   content={"failing_tests": ["tests/test_store.py::test_dup"], "output_tail": "AssertionError: dup"},
                   metadata={"ok": False, "passed": 7, "failed": 1, "errors": 0, "coverage_percent": 91.5})
    html = page(staff_client(rita), f"{INBOX}{task.pk}/change/")
    assert "The agent's reasoning" in html and "Two tests keep &lt;b&gt;failing&lt;/b&gt;" in html
    assert "A CLI reading list stored in JSON" in html
    assert "<code>readinglist/store.py</code>" in html and "+40" in html and "-1" in html
    assert "7 passed, 1 failed, 0 errors" in html and "coverage 91.5" in html and "AssertionError: dup" in html
    assert "Failing tests" in html and "Decide Reading list?" in html


def test_a_deployment_shows_the_whole_change_it_delivers_once(acme_project, rita):
    """The engineer's last attempt changed two files; the deployment adds QC's acceptance test and the CI
    workflow: the page lists the four, from the gate's context, and not a second list beside it."""
    whole = ["A .github/workflows/ci.yml (+20 -0)", "A tests/acceptance/test_list.py (+9 -0)",
             "A readinglist/store.py (+40 -0)", "M README.md (+3 -1)"]
    task = open_review(acme_project, kind="deployment_approval", context={"diff_summary": whole})
    artifact_store(task.requirement, kind="diff_summary", name="workspace", content=whole[2:])
    html = page(staff_client(rita), f"{INBOX}{task.pk}/change/")
    assert "Changed files (4)" in html and "<code>.github/workflows/ci.yml</code>" in html
    assert "Diff summary" not in html


def test_a_member_without_the_reviewer_role_sees_why_they_cannot_decide(acme_project, sam):
    task = open_review(acme_project)
    html = page(staff_client(sam), f"{INBOX}{task.pk}/change/")
    assert "You can read this task but not decide it: sam has no reviewer role in Acme" in html
    assert 'value="approve"' not in html and "Claim</button>" not in html


def test_a_review_page_for_an_id_that_is_not_a_uuid_is_not_found(rita):
    assert staff_client(rita).get(f"{INBOX}not-a-uuid/change/").status_code == 404


# --- Decisions.

def test_a_reviewer_approves_from_the_review_page_and_the_stories_are_approved(alice, rita):
    req = submit(alice)
    task = pending(req, "stories_approval")
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {"decision": "approve",
                                                                     "stories_version": stories_version(task)},
                                       follow=True)
    assert "approve recorded" in response.content.decode()
    task.refresh_from_db()
    assert (task.state, task.decided_by, task.decided_via) == ("resolved", rita, "admin")
    assert set(req.stories.values_list("state", flat=True)) == {"approved"}


def test_an_admin_decision_records_who_what_when_and_from_where(acme_project, rita):
    task = open_review(acme_project, kind="clarification")
    client = staff_client(rita)
    response = client.post(f"{INBOX}{task.pk}/decide/", {"decision": "answer", "answer": "Readers at home"},
                           HTTP_USER_AGENT="Firefox/140", REMOTE_ADDR="192.0.2.7")
    assert response["Location"] == INBOX
    row = StateTransition.objects.get(subject="review_task", subject_id=str(task.pk), event="resolve")
    assert (row.actor_user, row.via, row.metadata["decision"], row.metadata["answer"]) == (
        rita, "admin", "answer", "Readers at home")
    assert row.metadata["origin"] == {"ip": "192.0.2.7", "user_agent": "Firefox/140",
                                      "path": f"{INBOX}{task.pk}/decide/"}
    assert row.created_at <= timezone.now()


@pytest.mark.parametrize("reason", [{}, {"reason": "  "}], ids=["no reason", "a blank reason"])
def test_a_rejection_without_a_reason_shows_the_page_again_with_what_was_typed(acme_project, rita, reason):
    task = open_review(acme_project)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {
        "decision": "reject", **reason, "feedback": "Story 2 needs <a> measurable criterion"})
    html = response.content.decode()
    assert response.status_code == 400 and "a &#x27;reject&#x27; decision needs a reason" in html
    assert ">Story 2 needs &lt;a&gt; measurable criterion</textarea>" in html
    task.refresh_from_db()
    assert task.state == "open"


def test_a_decision_by_staff_without_the_reviewer_role_is_refused_and_shows_what_they_typed(alice, sam):
    task = pending(submit(alice), "stories_approval")
    response = staff_client(sam).post(f"{INBOX}{task.pk}/decide/",
                                      {"decision": "request_changes", "feedback": "Shorter stories"})
    html = response.content.decode()
    assert response.status_code == 403 and "no reviewer role" in html
    assert "Yours, not recorded (feedback): Shorter stories" in html
    task.refresh_from_db()
    assert task.state == "open"


def test_a_decision_the_form_cannot_read_is_a_400_on_the_review_page(acme_project, rita):
    task = open_review(acme_project)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {"decision": "maybe", "feedback": "kept"})
    html = response.content.decode()
    assert response.status_code == 400 and "Select a valid choice" in html and ">kept</textarea>" in html


def test_deciding_a_task_decided_meanwhile_is_a_409_that_keeps_what_was_typed(acme_project, rita):
    task = open_review(acme_project)
    ReviewTask.objects.filter(pk=task.pk).update(state="resolved", decision="approve")
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {"decision": "request_changes",
                                                                     "feedback": "Split story 2"})
    html = response.content.decode()
    assert response.status_code == 409 and "review task is already resolved (approve)" in html
    assert "Yours, not recorded (feedback): Split story 2" in html and 'value="approve"' not in html


def test_request_changes_with_both_boxes_typed_gives_the_business_analyst_both(alice, rita):
    req = submit(alice)
    task = pending(req, "stories_approval")
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {
        "decision": "request_changes", "reason": "Stories are too big",
        "feedback": "Split story 2 into import and export"})
    assert response.status_code == 302
    sent_back = business_analyst_context(req.pk, round=2).feedback
    assert [f.text for f in sent_back] == ["Split story 2 into import and export\n\nStories are too big"]
    assert {s.rejection_reason for s in req.stories.filter(round=1)} == {sent_back[0].text}


# --- Story edits before deciding.

def test_a_reviewer_edits_a_story_before_approving_and_the_edit_is_theirs(acme_project, rita):
    task = open_review(acme_project, stories=2)
    story = task.requirement.stories.get(position=2)
    client = staff_client(rita)
    html = page(client, f"{INBOX}{task.pk}/change/?edit={story.pk}")
    assert "Save story 2" in html and "Edit story 1 before deciding" in html
    response = client.post(f"{INBOX}{task.pk}/stories/{story.pk}/", {
        "title": "Story two, sharper", "as_a": "reader", "i_want": "feature 2", "so_that": "I read more",
        "acceptance_criteria": "criterion 2\n\n  a new criterion  ", "priority": "should", "story_points": "5",
        "version": story_version(story),
    }, follow=True, REMOTE_ADDR="192.0.2.8")
    assert "saved; the change is recorded as yours" in response.content.decode()
    story.refresh_from_db()
    assert (story.title, story.acceptance_criteria, story.priority, story.story_points) == (
        "Story two, sharper", ["criterion 2", "a new criterion"], "should", 5)
    edit = StoryEdit.objects.get()
    assert (edit.edited_by, edit.via, edit.origin["ip"]) == (rita, "admin", "192.0.2.8")
    assert edit.before == {"title": "Story 2", "acceptance_criteria": ["criterion 2"], "priority": "must",
                           "story_points": 3}
    task.refresh_from_db()
    assert task.context["stories"][1]["title"] == "Story two, sharper"
    assert "Edited by rita" in page(client, f"{INBOX}{task.pk}/change/")


def test_an_invalid_story_edit_reopens_the_form_with_what_was_typed_and_why(acme_project, rita):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=1)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/stories/{story.pk}/",
                                       {**STORY_FIELDS, "i_want": "to keep my words", "story_points": "4"})
    html = response.content.decode()
    assert response.status_code == 400 and "The story was not changed" in html and "story_points" in html
    assert "Save story 1" in html and 'id="id_story1_title"' in html and 'value="ok title"' in html
    assert "\nto keep my words</textarea>" in html  # Django writes a newline after <textarea>
    assert not StoryEdit.objects.exists()


def test_a_story_the_schema_refuses_reopens_the_form_with_the_schemas_reason(acme_project, rita):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=2)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/stories/{story.pk}/",
                                       {**STORY_FIELDS, "title": "ab", "version": story_version(story)})
    html = response.content.decode()
    assert response.status_code == 400 and "Save story 2" in html and 'value="ab"' in html
    assert "title: String should have at least 3 characters" in html
    story.refresh_from_db()
    assert story.title == "Story 2" and not StoryEdit.objects.exists()


def test_a_story_edit_by_someone_who_may_not_decide_is_refused(acme_project, sam):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=1)
    response = staff_client(sam).post(f"{INBOX}{task.pk}/stories/{story.pk}/",
                                      {**STORY_FIELDS, "version": story_version(story)})
    assert response.status_code == 403 and "no reviewer role" in response.content.decode()
    assert not StoryEdit.objects.exists()


def test_a_story_edit_that_changes_nothing_does_not_say_saved(acme_project, rita):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=1)
    same = {"title": "Story 1", "as_a": "reader", "i_want": "feature 1", "so_that": "I read more",
            "acceptance_criteria": "criterion 1", "priority": "must", "story_points": "3",
            "version": story_version(story)}
    html = staff_client(rita).post(f"{INBOX}{task.pk}/stories/{story.pk}/", same, follow=True).content.decode()
    assert "nothing changed, so nothing was saved" in html and "saved; the change is recorded" not in html
    assert not StoryEdit.objects.exists()


# --- Bulk decisions.

def test_bulk_approve_decides_every_selected_task(alice, rita):
    tasks = [pending(submit(alice), "stories_approval") for _ in range(2)]
    client = staff_client(rita)
    selected = {"action": "approve_selected", "_selected_action": [str(t.pk) for t in tasks]}
    confirm = client.post(INBOX, selected)
    assert confirm.status_code == 200 and "2 tasks selected" in confirm.content.decode()
    response = client.post(INBOX, {**selected, "apply": "1", "decision": "approve", "reason": "Looks right"},
                           follow=True)
    assert "Approve: 2 of 2 task(s) decided" in response.content.decode()
    for task in tasks:
        task.refresh_from_db()
        assert (task.decision, task.decided_by, task.decided_via, task.reason) == ("approve", rita, "admin",
                                                                                   "Looks right")
        row = StateTransition.objects.get(subject_id=str(task.pk), event="resolve")
        assert row.metadata["origin"]["bulk"] == 2


def test_bulk_reject_needs_one_reason_and_reports_what_it_could_not_do(acme_project, rita):
    tasks = [open_review(acme_project, kind="clarification", title=f"vague {i}") for i in range(3)]
    ReviewTask.objects.filter(pk=tasks[2].pk).update(state="expired")
    client = staff_client(rita)
    selected = {"action": "reject_selected", "_selected_action": [str(t.pk) for t in tasks],
                "status": "all"}
    refused = client.post(f"{INBOX}?status=all", {**selected, "apply": "1", "decision": "reject", "reason": " "})
    assert "Give the reason the tasks are rejected for." in refused.content.decode()
    response = client.post(f"{INBOX}?status=all", {**selected, "apply": "1", "decision": "reject",
                                                   "reason": "Out of scope this quarter"}, follow=True)
    html = response.content.decode()
    assert "Reject: 2 of 3 task(s) decided" in html and "Clarification #1: vague 2: review task is already expired" in html
    assert {t.reason for t in ReviewTask.objects.filter(state="resolved")} == {"Out of scope this quarter"}


def test_bulk_approve_skips_and_names_the_tasks_their_own_page_would_not_approve_in_bulk(alice, rita):
    """A deployment a hold keeps for a person (a CI workflow, the scope guard: holds.py) is approved on its own page,
    where the change is shown, not with one reason for many; a replay's held gate is nobody's to decide. Each is
    skipped with a message saying why; the others are decided."""
    source = submit(alice)
    stories = pending(source, "stories_approval")
    replayed = pending(fresh(replay_start(source_id=source.pk, via="cli")), "stories_approval")
    shipped = submit(alice)
    decide(pending(shipped, "stories_approval"), rita, "approve")
    with_ci = pending(fresh(shipped), "deployment_approval")  # every run's DevOps step adds a workflow
    flagged = open_review(stories.requirement.project, kind="deployment_approval", title="Big change",
                          context={"scope": {"flagged": True, "reasons": ["400 lines changed, over the limit of 300"]}})
    tasks = [stories, replayed, with_ci, flagged]
    selected = {"action": "approve_selected", "_selected_action": [str(t.pk) for t in tasks], "status": "all"}

    response = staff_client(rita).post(f"{INBOX}?status=all", {**selected, "apply": "1", "decision": "approve",
                                                               "reason": "all fine"}, follow=True)
    html = response.content.decode()
    assert "approve: 1 of 4 task(s) decided; 3 skipped" in html.lower()
    assert f"{with_ci}: not approved in bulk, approve it on its own page: the change adds or edits CI workflows" in html
    assert f"{flagged}: not approved in bulk, approve it on its own page: the scope guard flagged the change" in html
    assert f"{replayed}: skipped: held: this is a replay&#x27;s gate" in html
    assert [t.pk for t in tasks if not ReviewTask.objects.get(pk=t.pk).is_pending] == [stories.pk]


def test_a_decided_deployment_shows_the_test_results_it_was_decided_on_not_a_later_rounds(acme_project, rita):
    task = open_review(acme_project, kind="deployment_approval", context={"diff_summary": ["A app.py (+10 -0)"]})
    artifact_store(task.requirement, kind="test_report", name="qc", summary="ROUND-1: 3 passed",
                   content={"passed": 3, "failed": 0, "errors": 0}, metadata={"ok": True, "passed": 3})
    ReviewTask.objects.filter(pk=task.pk).update(state="resolved", decision="reject", reason="only 3 tests",
                                                 decided_by=rita, decided_via="admin", decided_at=timezone.now())
    artifact_store(task.requirement, kind="test_report", name="qc", summary="ROUND-2: 40 passed",
                   content={"passed": 40, "failed": 0, "errors": 0}, metadata={"ok": True, "passed": 40})
    page = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{task.pk}/change/").content.decode()
    assert "<code>app.py</code>" in page and "ROUND-1" in page and "ROUND-2" not in page
