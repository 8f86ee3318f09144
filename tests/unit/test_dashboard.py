"""The staff dashboard: staff only, scoped to the user's organizations, charts drawn from real numbers,
and a query count that does not grow with the data."""
import re
import statistics
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from lifecycle.dashboard import selectors
from lifecycle.models import ActionPreauthorization, LLMCall, Requirement, ReviewTask, StateTransition
from tests.conftest import staff_client
from tests.review_tasks import age, bulk_tasks, open_review

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/staff/dashboard/"



def llm_call(req, role, *, input_tokens, cache_read, cost):
    return LLMCall.objects.create(requirement=req, role=role, provider="replay", model="claude-sonnet-5-5",
                                  system_sha256="0" * 64, system="s", tool_name="t", input_tokens=input_tokens,
                                  output_tokens=100, cache_read_tokens=cache_read, cost_usd=Decimal(cost))


def chart(html: str, key: str) -> str:
    match = re.search(rf'<figure class="module chart-figure" data-chart="{key}">(.*?)</figure>', html, re.S)
    assert match, f"no chart {key}"
    return match.group(1)


@pytest.fixture
def activity(acme_project, rita):
    late = age(open_review(acme_project, title="Late"), hours=30)
    open_review(acme_project, title="Fresh")
    llm_call(late.requirement, "business_analyst", input_tokens=1000, cache_read=3000, cost="0.0420")
    llm_call(late.requirement, "product_owner", input_tokens=1000, cache_read=0, cost="0.0100")
    Requirement.objects.filter(pk=late.requirement_id).update(dev_attempts=2)
    return late


def test_only_staff_see_it(rita, client):
    assert client.get(URL)["Location"].startswith("/admin/login/")
    client.force_login(rita)  # a member, but not staff
    assert client.get(URL)["Location"].startswith("/admin/login/")


def test_the_site_root_leads_to_the_admin_whose_view_site_link_is_the_dashboard(rita, client):
    assert client.get("/").headers["Location"] == "/admin/"
    page = staff_client(rita).get("/admin/")
    assert page.status_code == 200 and b'href="/staff/dashboard/"' in page.content


def test_it_charts_states_sla_breaches_loops_and_llm_cost(activity, rita):
    html = staff_client(rita).get(URL).content.decode()
    assert "User Stories Created: 2" in chart(html, "states")
    ages = chart(html, "ages")
    assert 'class="bar breached"' in ages and "1–3 d — SLA breached: 1" in ages and "&lt; 1 h — within SLA: 1" in ages
    assert "business_analyst: 0.04" in chart(html, "cost_roles")
    assert "business_analyst: 75 %" in chart(html, "cache_roles")  # 3000 of 4000 prompt tokens read from the cache
    assert "2 — requirements: 1" in chart(html, "attempts")
    assert '<tr class="breached">' in html and "Stories Approval #1" in html  # the overdue table
    assert re.search(r'<span class="value">60 %</span>prompt-cache hit rate', html)  # 3000 of 5000 overall
    assert "$0.05" in html


def test_decided_by_the_sla_policy_counts_timeouts_apart_from_gates_decided_in_advance(acme_project, rita):
    ActionPreauthorization.objects.create(project=acme_project, action="stories_approval:approve")
    for i in range(2):
        open_review(acme_project, title=f"Pre {i}")
    timed_out = open_review(acme_project, kind="clarification")
    ReviewTask.objects.filter(pk=timed_out.pk).update(state="resolved", decision="reject", decided_by_policy="sla_policy",
                                                      decided_at=timezone.now())
    html = staff_client(rita).get(URL).content.decode()
    assert '<span class="value">1 / 3</span>decided by the SLA policy, timed out (30 days)' in html
    assert '<span class="value">2 / 3</span>decided in advance, pre-authorized or autonomous (30 days)' in html


def test_it_shows_only_the_users_organizations(activity, oscar):
    html = staff_client(oscar).get(URL).content.decode()
    assert "No data yet." in chart(html, "ages") and "business_analyst" not in html


def test_median_time_in_each_state(acme_project):
    now = timezone.now()
    for hours in (1, 3, 8):
        req = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
        for offset, state in ((0, "received"), (hours, "clarified")):
            row = StateTransition.objects.create(requirement=req, subject_id=str(req.pk), event="x", from_state="",
                                                 to_state=state)
            StateTransition.objects.filter(pk=row.pk).update(created_at=now - timedelta(hours=10 - offset))
    medians = selectors.median_hours_in_state(selectors.Scope(None), now - timedelta(days=1))
    assert medians == [("Received", 3.0, 3)]  # time in "clarified" is still running: not a finished stay


def transitions_at(req, *stays):
    """Transitions of `req` at the given hours ago, (state, hours ago) each."""
    now = timezone.now()
    for state, hours_ago in stays:
        row = StateTransition.objects.create(requirement=req, subject_id=str(req.pk), event="x", from_state="",
                                             to_state=state)
        StateTransition.objects.filter(pk=row.pk).update(created_at=now - timedelta(hours=hours_ago))


def test_medians_are_computed_in_one_query_and_match_the_plain_median(acme_project, django_assert_num_queries):
    """Odd and even numbers of stays, ties, a stay still running, and transitions before the window."""
    lengths = {"received": [1, 3, 8, 2], "clarified": [5, 5, 1], "user_stories_created": [0.5]}
    for i in range(4):
        req = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
        stays, clock = [("received", 500)], 20.0  # the first is outside the window: it starts no stay
        for state in ("received", "clarified", "user_stories_created"):
            if i < len(lengths[state]):
                stays.append((state, clock))
                clock -= lengths[state][i]
        transitions_at(req, *stays, ("design_ready", clock))  # still running: not a finished stay
    since = timezone.now() - timedelta(days=1)
    with django_assert_num_queries(1):
        medians = selectors.median_hours_in_state(selectors.Scope(None), since)
    assert medians == [("Received", pytest.approx(statistics.median([1, 3, 8, 2])), 4),
                       ("Clarified", pytest.approx(5.0), 3), ("User Stories Created", pytest.approx(0.5), 1)]


def test_llm_usage_leaves_out_the_replays_copied_calls(activity, rita):
    replay = Requirement.objects.create(organization=activity.organization, project=activity.requirement.project,
                                        brief="b", title="Replayed run", replay_of=activity.requirement)
    llm_call(replay, "business_analyst", input_tokens=1000, cache_read=3000, cost="0.0420")
    by_role = selectors.llm_by_role(selectors.Scope(None))
    assert {r["role"]: (r["calls"], r["cost"]) for r in by_role} == {
        "business_analyst": (1, Decimal("0.042")), "product_owner": (1, Decimal("0.01"))}
    assert selectors.llm_totals(by_role)["cost"] == Decimal("0.052")
    assert [r["requirement_id"] for r in selectors.llm_by_requirement(selectors.Scope(None))] == [activity.requirement_id]
    html = staff_client(rita).get(URL).content.decode()
    assert "LLM cost, 2 calls" in html and "Replayed run" not in html


@pytest.mark.parametrize("count", [10, 1000])
def test_the_dashboard_costs_the_same_queries_for_10_or_1000_tasks(acme_project, rita, count,
                                                                   django_assert_num_queries):
    req = bulk_tasks(acme_project, count, overdue_every=10)
    llm_call(req, "business_analyst", input_tokens=10, cache_read=10, cost="0.01")
    client = staff_client(rita)
    # session, user, scope, 11 selectors, the sidebar's permission checks, and the header's unread count
    with django_assert_num_queries(19):
        response = client.get(URL)
    assert response.status_code == 200 and 'class="bar breached"' in response.content.decode()
