"""Reviewers and staff in a real headless Chromium: the inbox as a landing page, claiming, editing a story,
deciding, and the dashboard's charts. Screenshots land in test-artifacts/."""
import pytest
from playwright.sync_api import expect

from lifecycle.models import LLMCall, ReviewTask, StoryEdit
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_review_inbox import log_in
from tests.flows import submit
from tests.review_tasks import age, open_review

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_finds_the_task_in_the_inbox_claims_it_reads_the_stories_and_approves(page, live_server, alice,
                                                                                          rita):
    req = submit(alice)
    log_in(page, live_server, rita)
    page.get_by_role("link", name="Review inbox").click()
    expect(page.get_by_role("heading", name="Review inbox")).to_be_visible()
    quick = page.locator(".inbox-quick")
    quick.get_by_role("link", name="Unassigned").click()
    page.get_by_role("button", name="Claim").first.click()
    expect(page.get_by_text("claimed; it is yours to decide")).to_be_visible()
    quick.get_by_role("link", name="Assigned to me").click()
    page.screenshot(path=str(ARTIFACTS / "inbox-assigned-to-me.png"), full_page=True)
    page.get_by_role("link", name="Stories Approval").first.click()

    expect(page.get_by_role("heading", name="Refuse duplicate ISBNs")).to_be_visible()
    expect(page.get_by_text("Books without an ISBN are never treated as duplicates")).to_be_visible()
    expect(page.locator("#assignee")).to_have_text("rita")
    page.screenshot(path=str(ARTIFACTS / "review-page-stories.png"), full_page=True)
    page.get_by_role("button", name="approve").click()

    expect(page.get_by_text("approve recorded")).to_be_visible()
    task = req.review_tasks.get(kind="stories_approval")
    assert (task.decision, task.decided_by, task.decided_via) == ("approve", rita, "admin")
    assert set(req.stories.values_list("state", flat=True)) == {"approved"}


def test_a_reviewer_edits_a_story_then_another_rejects_the_set_with_a_reason(page, live_server, acme_project, rita):
    task = open_review(acme_project, title="Reading list", stories=2)
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/reviewtask/{task.pk}/change/")
    page.get_by_role("link", name="Edit story 1 before deciding").click()
    page.fill("#id_story1_title", "Story one, made testable")
    page.fill("#id_story1_acceptance_criteria", "criterion 1\nGiven two books, the list shows both")
    page.get_by_role("button", name="Save story 1").click()
    expect(page.get_by_text("saved; the change is recorded as yours")).to_be_visible()
    expect(page.get_by_role("heading", name="Story one, made testable")).to_be_visible()
    assert StoryEdit.objects.get().after["acceptance_criteria"] == ["criterion 1", "Given two books, the list shows both"]

    page.fill("textarea[name=reason]", "Story two has no measurable criterion")
    page.get_by_role("button", name="reject").click()
    expect(page.get_by_text("reject recorded")).to_be_visible()
    task.refresh_from_db()
    assert (task.decision, task.reason) == ("reject", "Story two has no measurable criterion")


def test_the_dashboard_renders_its_charts_with_data(page, live_server, alice, rita, acme_project):
    req = submit(alice)  # model calls with tokens and cost, transitions, a stories task
    LLMCall.objects.create(requirement=req, role="business_analyst", provider="anthropic", model="claude-sonnet-5-5",
                           system_sha256="0" * 64, system="s", tool_name="t", input_tokens=800, output_tokens=300,
                           cache_read_tokens=2400, cost_usd="0.0051")  # the sample cassette has no cache reads
    age(open_review(acme_project, title="Waiting too long"), hours=30)
    ReviewTask.objects.filter(requirement__title="Waiting too long").update(state="escalated")
    log_in(page, live_server, rita)
    page.get_by_role("link", name="Dashboard").click()

    expect(page.get_by_role("heading", name="Requirements by state")).to_be_visible()
    for chart in ("states", "activity", "ages", "cost_roles", "cache_roles", "attempts"):
        expect(page.locator(f'figure[data-chart="{chart}"] svg rect.bar').first).to_be_visible()
    expect(page.locator('figure[data-chart="ages"] svg[role=img] rect.bar.breached')).to_have_count(1)
    expect(page.locator("#overdue-tasks tr.breached")).to_have_count(1)
    expect(page.locator("#llm-roles")).to_contain_text("business_analyst")
    page.screenshot(path=str(ARTIFACTS / "staff-dashboard.png"), full_page=True)
