"""A reviewer uses the admin review inbox in a real headless Chromium."""
import pytest
from playwright.sync_api import expect

from lifecycle.actors import Actor
from lifecycle.models import ReviewTask
from lifecycle.services.story_edits import story_edit, story_version
from tests.browser.conftest import ARTIFACTS
from tests.factories import MembershipFactory
from tests.flows import decide, pending, submit
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "correct horse battery staple"


def log_in(page, live_server, user) -> None:
    user.is_staff = True
    user.set_password(PASSWORD)
    user.save()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_a_reviewer_finds_the_task_reads_the_stories_and_approves(page, live_server, alice, rita):
    req = submit(alice)
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/reviewtask/?state__exact=open")
    page.get_by_role("link", name="Stories Approval").first.click()
    expect(page.get_by_text("Refuse duplicate ISBNs")).to_be_visible()
    expect(page.get_by_text("Books without an ISBN are never treated as duplicates")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "review-task-stories.png"), full_page=True)
    page.get_by_role("button", name="approve").click()
    expect(page.get_by_text("approve recorded")).to_be_visible()
    assert set(req.stories.values_list("state", flat=True)) == {"approved"}


def test_another_reviewer_rejects_with_a_reason(page, live_server, alice, rita):
    req = submit(alice)
    task = pending(req, "stories_approval")
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/reviewtask/{task.pk}/change/")
    page.fill("textarea[name=reason]", "Listing must say what it prints")
    page.get_by_role("button", name="reject").click()
    expect(page.get_by_text("reject recorded")).to_be_visible()
    task.refresh_from_db()
    assert (task.decision, task.reason, task.decided_via) == ("reject", "Listing must say what it prints", "admin")


def test_a_reviewer_injects_a_constraint_on_a_spent_budget(page, live_server, alice, rita, acme_project):
    acme_project.settings = {"budgets": {"roles": {"tech_lead": {"steps": 1}}}}
    acme_project.save()
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    task = pending(req, "budget_exhausted")
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/reviewtask/{task.pk}/change/")
    expect(page.locator("#budget")).to_contain_text("role:tech_lead")
    expect(page.get_by_role("button", name="Override the budget")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "review-task-budget.png"), full_page=True)
    page.fill("textarea[name=constraint]", "No new dependencies")
    page.get_by_role("button", name="Inject a constraint").click()
    expect(page.get_by_text("inject_constraint recorded")).to_be_visible()
    task.refresh_from_db()
    assert (task.decision, task.feedback, task.decided_via) == ("inject_constraint", "No new dependencies", "admin")


def test_approving_stories_another_reviewer_edited_meanwhile_shows_them_first(page, live_server, acme_project, rita):
    task = open_review(acme_project, title="Reading list", stories=2)
    rosa = MembershipFactory(organization=acme_project.organization, role="reviewer", user__username="rosa").user
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/reviewtask/{task.pk}/change/")
    expect(page.get_by_role("heading", name="2. Story 2")).to_be_visible()
    story = task.requirement.stories.get(position=2)  # Rosa, on her own page, while Rita reads
    story_edit(task_id=task.pk, story_id=story.pk, actor=Actor.human(rosa, "admin"),
               changes={"title": "Story 2, export only"}, version=story_version(story))

    page.fill("textarea[name=reason]", "read every story")
    page.get_by_role("button", name="approve").click()
    expect(page.get_by_text("the stories changed since they were shown to you").first).to_be_visible()
    expect(page.get_by_role("heading", name="2. Story 2, export only")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "review-task-stories-changed.png"), full_page=True)
    assert ReviewTask.objects.get(pk=task.pk).is_pending

    page.get_by_role("button", name="approve").click()
    expect(page.get_by_text("approve recorded")).to_be_visible()
    assert ReviewTask.objects.get(pk=task.pk).decision == "approve"
