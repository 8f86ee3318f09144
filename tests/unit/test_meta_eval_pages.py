"""The meta-evaluation log read back: its aggregates with trends per period, the staff page drawing them (a query
count that does not grow with the entries) and the API (entries and summary, each caller's organizations only)."""
import re
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from lifecycle.models import MetaEvalLog
from lifecycle.services.meta_eval_summary import Window, summary
from tests.conftest import api_for, staff_client
from tests.factories import OrganizationFactory, ProjectFactory

pytestmark = pytest.mark.django_db(transaction=True)
PAGE, API = "/staff/meta-eval/", "/api/v1/meta-eval/"


def logged(kind: str, organization, *, week: int = 0, role: str = "", project=None, **data) -> MetaEvalLog:
    """An entry `week` ISO weeks before this one (an hour after that week's Monday began)."""
    monday = Window("week", week + 1, None).starts[0]
    at = timezone.make_aware(datetime.combine(monday, datetime.min.time())) + timedelta(hours=1)
    return MetaEvalLog.objects.create(kind=kind, organization=organization, project=project, role=role,
                                      playbook="new_feature", data=data, created_at=at)


@pytest.fixture
def history(acme, acme_project, globex):
    """Acme: four routed fixes (one misrouted), budgets, three contradicted gates, two runs, four promotions;
    Globex: one misroute; and one entry older than any window."""
    for week, role, recurred in ((0, "senior_engineer", True), (0, "senior_engineer", False),
                                 (0, "senior_engineer", False), (1, "tech_architect", False)):
        logged("route", acme, week=week, role=role, project=acme_project, recurred=recurred)
    for use in (0.2, 0.4, 0.9):
        logged("budget_use", acme, use=use)
    logged("budget_use", acme, role="senior_engineer", use=0.5)
    logged("budget_use", acme, role="sandbox", use=None)
    logged("gate_signal", acme, week=1, gate="code_review", verdict="fail", contradicted_by="human_override")
    logged("gate_signal", acme, gate="quality", verdict="pass", contradicted_by="hidden_tests")
    logged("gate_signal", acme, gate="quality", verdict="pass", contradicted_by="later_gate")
    logged("loops", acme, dev_attempts=1, code_review_rounds=1, qc_rounds=1)
    logged("loops", acme, dev_attempts=3, code_review_rounds=2, qc_rounds=2)
    for decision in ("accepted", "modified", "rejected", "rolled_back"):
        logged("promotion", acme, decision=decision, artifact="prompt:qc_engineer")
    logged("route", globex, role="senior_engineer", recurred=True)
    logged("route", acme, week=60, role="senior_engineer", recurred=True)


def test_the_summary_aggregates_each_measure_per_week(history, acme):
    s = summary(Window("week", 4, [acme.pk]))
    assert len(s["periods"]) == 4 and re.fullmatch(r"\d{4}-W\d\d", s["periods"][-1])
    routes = s["route_accuracy"]
    assert (routes["routed"], routes["recurred"], routes["accuracy"]) == (4, 1, 0.75)
    assert routes["trend"] == [None, None, 1.0, 0.6667] and routes["counts"] == [0, 0, 1, 3]
    assert routes["by_role"] == [{"role": "senior_engineer", "routed": 3, "recurred": 1, "accuracy": 0.6667},
                                 {"role": "tech_architect", "routed": 1, "recurred": 0, "accuracy": 1.0}]
    assert s["budget_use"]["by_role"] == [
        {"role": "requirement", "playbook": "new_feature", "entries": 3, "median": 0.4, "max": 0.9},
        {"role": "senior_engineer", "playbook": "new_feature", "entries": 1, "median": 0.5, "max": 0.5}]
    assert s["budget_use"]["trend"] == [None, None, None, 0.4]
    gates = s["gate_signal"]
    assert gates["by_gate"] == [{"gate": "code_review", "false_passes": 0, "overridden_fails": 1},
                                {"gate": "quality", "false_passes": 2, "overridden_fails": 0}]
    assert gates["trend"] == {"false_passes": [0, 0, 0, 2], "overridden_fails": [0, 0, 1, 0]}
    assert s["loops"]["runs"] == 2 and s["loops"]["mean"]["dev_attempts"] == 2.0
    assert s["loops"]["trend"]["code_review_rounds"] == [None, None, None, 1.5]
    promotion = s["promotion"]
    assert (promotion["decided"], promotion["acceptance_rate"], promotion["rolled_back"]) == (3, 0.6667, 1)
    assert promotion["trend"] == [None, None, None, 0.6667]


def test_the_summary_per_day_and_for_another_organization(history, acme, globex):
    initech = OrganizationFactory(slug="initech")
    MetaEvalLog.objects.create(kind="route", organization=initech, role="senior_engineer", data={"recurred": True})
    days = summary(Window("day", 3, [initech.pk]))
    assert days["periods"][-1] == timezone.localdate().isoformat()
    assert days["route_accuracy"]["counts"] == [0, 0, 1] and days["route_accuracy"]["trend"] == [None, None, 0.0]
    everything = summary(Window("week", 4, None))["route_accuracy"]
    assert (everything["routed"], everything["recurred"]) == (6, 3)  # acme 4, globex 1, initech 1
    assert summary(Window("week", 4, []))["route_accuracy"]["routed"] == 0


def test_only_staff_see_the_page_and_the_dashboard_links_it(history, rita, client):
    assert client.get(PAGE)["Location"].startswith("/admin/login/")
    client.force_login(rita)  # a member, not staff
    assert client.get(PAGE)["Location"].startswith("/admin/login/")
    assert 'href="/staff/meta-eval/"' in staff_client(rita).get("/staff/dashboard/").content.decode()


def test_the_page_shows_a_staff_members_organizations_with_charts(history, rita):
    html = staff_client(rita).get(PAGE).content.decode()
    assert "75 %</span>route accuracy (4 routed fixes, 1 misrouted)" in html
    assert "2 / 1</span>gate false passes / overridden fails" in html
    assert "67 %</span>promotions accepted (3 decided, 1 rolled back)" in html
    for key in ("routes", "budget", "budget_trend", "gates", "loops", "promotions"):
        assert f'data-chart="{key}"' in html, key
    routes = re.search(r'data-chart="routes">(.*?)</figure>', html, re.S).group(1)
    assert "same failure again: 1" in routes and "held: 2" in routes
    assert "<td>senior_engineer</td><td>3</td><td>1</td>" in html
    per_day = staff_client(rita).get(f"{PAGE}?period=day").content.decode()
    assert "Per day, the last 14" in per_day


@pytest.mark.parametrize("weeks", [1, 30])
def test_the_page_costs_the_same_queries_for_few_or_many_entries(acme, rita, weeks, django_assert_max_num_queries):
    for week in range(weeks):
        for kind, data in (("route", {"recurred": False}), ("budget_use", {"use": 0.5}), ("loops", {"dev_attempts": 2}),
                           ("gate_signal", {"gate": "quality", "contradicted_by": "hidden_tests"}),
                           ("promotion", {"decision": "accepted"})):
            for _ in range(3):
                logged(kind, acme, week=week % 12, role="senior_engineer", **data)
    client = staff_client(rita)
    # session, user, the staff member's organizations, one per measure (5), then the admin's header for a staff
    # member who is no superuser (their permissions, twice; their memberships, twice; the unread count)
    with django_assert_max_num_queries(13):
        response = client.get(PAGE)
    assert response.status_code == 200 and "route accuracy" in response.content.decode()


def test_the_api_lists_a_callers_entries_newest_first_filtered_and_paged(history, alice, oscar, acme_project):
    assert Client().get(API).status_code == 401 and Client().get(f"{API}summary/").status_code == 401
    client = api_for(alice)
    page = client.get(API).json()
    assert page["count"] == 19 and {row["organization"] for row in page["results"]} == {str(acme_project.organization_id)}
    stamps = [row["created_at"] for row in page["results"]]
    assert stamps == sorted(stamps, reverse=True)
    routes = client.get(API, {"kind": "route", "project": str(acme_project.pk), "limit": 2}).json()
    assert routes["count"] == 4 and len(routes["results"]) == 2 and routes["next"]
    assert set(routes["results"][0]) == {"id", "kind", "created_at", "organization", "project", "requirement", "role",
                                         "playbook", "data"}
    assert api_for(oscar).get(API).json()["count"] == 1  # Globex's misroute only
    other = ProjectFactory(organization=oscar.memberships.get().organization, slug="other")
    assert client.get(API, {"project": str(other.pk)}).json() == {"project": ["no such project"]}
    assert client.get(API, {"kind": "mood"}).status_code == 400
    assert client.get(API, {"colour": "red"}).json() == {"colour": ["unknown field"]}


def test_the_api_summary_is_the_pages_numbers(history, alice, acme_project):
    client = api_for(alice)
    body = client.get(f"{API}summary/").json()
    assert body["period"] == "week" and len(body["periods"]) == 12
    assert body["route_accuracy"]["accuracy"] == 0.75 and body["promotion"]["acceptance_rate"] == 0.6667
    days = client.get(f"{API}summary/", {"period": "day", "periods": 7, "project": str(acme_project.pk)}).json()
    assert len(days["periods"]) == 7 and days["budget_use"]["by_role"] == []  # budgets were logged without a project
    assert client.get(f"{API}summary/", {"periods": 53}).json() == {"periods": ["at most 52 for a week"]}
    assert client.get(f"{API}summary/", {"period": "year"}).status_code == 400


def test_an_operator_sees_every_organizations_entries_and_those_of_none(history, db):
    MetaEvalLog.objects.create(kind="promotion", organization=None, data={"decision": "accepted"})
    operator = get_user_model().objects.create_superuser("ops", "ops@example.com", "x")
    assert api_for(operator).get(API).json()["count"] == 21
    assert api_for(operator).get(f"{API}summary/").json()["route_accuracy"]["routed"] == 5
