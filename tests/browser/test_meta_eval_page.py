"""The meta-evaluation page in a real headless Chromium: reached from the staff dashboard, its charts drawn with
data. Screenshot in test-artifacts/."""
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_review_inbox import log_in
from tests.unit.test_meta_eval_pages import history  # noqa: F401  (the fixture: a few weeks of entries)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_meta_evaluation_page_is_linked_from_the_dashboard_and_draws_its_charts(page, live_server, rita, history):  # noqa: F811
    log_in(page, live_server, rita)
    page.get_by_role("link", name="Dashboard").click()
    page.get_by_role("link", name="meta-evaluation", exact=True).click()

    expect(page.get_by_role("heading", name="Route accuracy")).to_be_visible()
    expect(page.locator("#meta-kpis")).to_contain_text("75 %")
    for chart in ("routes", "budget", "gates", "loops", "promotions"):
        expect(page.locator(f'figure[data-chart="{chart}"] svg rect.bar').first).to_be_visible()
    expect(page.locator('figure[data-chart="routes"] svg[role=img] rect.bar.breached')).to_have_count(1)  # this week's misroute
    expect(page.locator("#routes-by-role tr.breached")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "meta-evaluation.png"), full_page=True)
