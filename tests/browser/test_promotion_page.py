"""An owner reviews a proposed prompt change in a real headless Chromium: the diff and both eval runs side by side,
accepts it with a reason, then rolls it back; the project's current bundle follows each decision (ADR 39)."""
import pytest
from playwright.sync_api import expect

from lifecycle.models import Project, PromotionDecision
from lifecycle.services.promotions import current_version
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_review_inbox import log_in
from tests.factories import MembershipFactory
from tests.unit.test_promotions import propose_prompt

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_accepts_a_promotion_on_its_page_then_rolls_it_back(page, live_server, alice, acme, acme_project):
    owner = MembershipFactory(organization=acme, role="admin", user__username="olga").user
    original = current_version(acme_project, "prompts")[0]
    proposal = propose_prompt(acme_project, alice)
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/admin/lifecycle/promotiondecision/?state__exact=proposed")
    page.locator(f'#result_list a[href*="/{proposal.pk}/change/"]').click()
    expect(page.locator("#promotion-change")).to_contain_text("+CONSTRAINT FROM A PROMOTION")
    evidence = page.locator("#promotion-evidence")
    expect(evidence).to_contain_text(f"current (run #{proposal.current_run_id})")
    expect(evidence.locator("tr", has_text="deployed").first).to_contain_text("0")
    expect(evidence.locator(".promotion-cases")).to_contain_text("escalated, hidden not_run")
    page.screenshot(path=str(ARTIFACTS / "promotion-page.png"), full_page=True)

    decide = page.locator("#promotion-decide")
    decide.get_by_label("accept").check()
    decide.get_by_label("Reason").fill("the candidate deployed where the current escalated")
    decide.get_by_role("button", name="Decide").click()
    expect(page.locator("#promotion-state")).to_have_text("Accepted")
    assert current_version(Project.objects.get(pk=acme_project.pk), "prompts")[0] == proposal.candidate_version

    rollback = page.locator("#promotion-rollback")
    rollback.get_by_label("Reason").fill("live runs got slower")
    rollback.get_by_role("button", name="Roll back").click()
    expect(page.locator("h1")).to_have_text(f"Rollback of the prompt bundle of {acme_project}")
    expect(page.locator("#promotion-history")).to_contain_text("rollback accepted by olga")
    assert current_version(Project.objects.get(pk=acme_project.pk), "prompts")[0] == original
    assert PromotionDecision.objects.filter(kind="rollback", rollback_of=proposal).exists()
