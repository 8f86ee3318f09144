"""A reviewer asks about a requirement on its admin page in a real headless Chromium: the answer, written later by
a worker, appears without a reload; an answer whose specialist asked to decide the review task shows an approval
request, approved on the page, and the task is decided as the reviewer.

The live server runs in the test's process, so the `scripted` provider answers for the worker; the queued
answer task is held and run by the test once the page shows it waiting, so the page must poll to see it."""
import pytest
from playwright.sync_api import expect

from lifecycle.models import ActionApproval, ReviewTask
from lifecycle.services.answering import answer_message
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_review_inbox import log_in
from tests.conversations import script_answer
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(monkeypatch) -> list[int]:
    """The answers queued for a worker, in order (not sent: the test plays the worker)."""
    queued: list[int] = []
    monkeypatch.setattr("lifecycle.services.conversations.send_task", lambda name, pk: queued.append(pk))
    return queued


def ask(page, text: str) -> None:
    panel = page.locator("#ask-panel")
    panel.locator("textarea[name=text]").fill(text)
    panel.get_by_role("button", name="Ask").click()


def test_asking_on_a_requirement_page_then_approving_what_the_assistant_asked(page, live_server, scripted, held,
                                                                            acme_project, rita):
    task = open_review(acme_project, title="Reading list")
    log_in(page, live_server, rita)
    page.goto(f"{live_server.url}/admin/lifecycle/requirement/{task.requirement_id}/change/")
    panel = page.locator("#ask-panel")
    expect(panel.get_by_role("heading", name="Ask about this requirement")).to_be_visible()
    page.evaluate("window.notReloaded = true")

    ask(page, "What is the reading list waiting for?")
    expect(panel.get_by_text("Waiting for a worker…")).to_be_visible()
    expect(panel.get_by_text("The team is answering…")).to_be_visible()
    script_answer(scripted, specialists={"status_reporter": [("requirement_status", {})]},
                  answer="It waits for the stories' approval.")
    answer_message(held[-1])
    expect(panel.get_by_text("It waits for the stories' approval.")).to_be_visible()
    expect(panel.get_by_text("Route: status_reporter")).to_be_visible()
    expect(panel.locator(".conversation-status")).to_have_text("")

    ask(page, "Approve the stories, they look right")
    expect(panel.get_by_text("Waiting for a worker…")).to_be_visible()  # posted: its answer is queued
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "approve", "reason": "they look right"})]},
        answer="I asked for the stories to be approved: approve the request to do it.")
    answer_message(held[-1])
    request = panel.locator("#approvals")
    expect(request.get_by_text("approve the stories approval of Reading list", exact=True)).to_be_visible()
    assert page.evaluate("window.notReloaded") is True
    assert ReviewTask.objects.get(pk=task.pk).is_pending  # asking ran nothing
    page.screenshot(path=str(ARTIFACTS / "conversation-approval.png"), full_page=True)

    request.get_by_role("button", name="Approve").click()
    expect(page.get_by_text("approve the stories approval of Reading list: done")).to_be_visible()
    expect(page.get_by_text("approved by rita")).to_be_visible()  # the system's note in the conversation
    decided = ReviewTask.objects.get(pk=task.pk)
    assert (decided.decision, decided.decided_by) == ("approve", rita)
    assert ActionApproval.objects.get().decided_via == "admin"
    assert decided.decided_via == "admin"
