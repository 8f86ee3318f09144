"""The evaluation runs page: staff only, each suite's runs with a run set against the one before it case by case,
charts per prompt bundle, a JSON export equal to `aiteam_eval export`, and a query count that does not grow."""
import json
import re
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from lifecycle.models import EvalCase, EvalRun, Membership, Organization, PromptBundle
from tests.conftest import staff_client

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/staff/evals/"


def bundle(char: str) -> PromptBundle:
    return PromptBundle.objects.create(sha256=char * 64, prompts={"business_analyst": f"prompt {char}"})


def eval_run(suite: str, prompts: PromptBundle, *, hours_ago: float, cases: list[tuple],
             cache: tuple[int, int] = (0, 0)) -> EvalRun:
    """`cases`: (name, outcome, hidden, passed, false pass, cost) rows, each of 5 hidden tests, 1,000 input tokens
    after the last cache breakpoint and `cache` (read, written) before it."""
    run = EvalRun.objects.create(suite=suite, bundle=prompts, provider="replay", finished_at=timezone.now())
    EvalRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=hours_ago))
    EvalCase.objects.bulk_create(
        EvalCase(run=run, name=name, kind="brief", outcome=outcome, hidden=hidden, hidden_passed=passed,
                 hidden_total=5, quality_gate_passed=True, gate_false_pass=false_pass, input_tokens=1000,
                 output_tokens=200, cache_read_tokens=cache[0], cache_creation_tokens=cache[1],
                 cost_usd=Decimal(cost), wall_s=60.0)
        for name, outcome, hidden, passed, false_pass, cost in cases)
    return run


@pytest.fixture
def two_runs(db):
    """The offline suite on bundle a, then on bundle b: `todo` now passes its hidden tests, `notes` escalates."""
    first = eval_run("offline", bundle("a"), hours_ago=5, cases=[
        ("todo", "deployed", "partial", 3, True, "0.2000"), ("notes", "deployed", "full", 5, False, "0.1000")])
    second = eval_run("offline", bundle("b"), hours_ago=1, cases=[
        ("todo", "deployed", "full", 5, False, "0.1500"), ("notes", "escalated", "not_run", 0, False, "0.3000")],
        cache=(3000, 1000))
    return first, second


def section(html: str, css: str) -> str:
    match = re.search(rf'<div class="module {css}">(.*?)</div>', html, re.S)
    assert match, f"no {css}"
    return match.group(1)


def test_only_staff_see_the_page_and_the_export(two_runs, rita, client):
    first, _ = two_runs
    for url in (URL, f"{URL}{first.pk}.json"):
        assert client.get(url)["Location"].startswith("/admin/login/")
    client.force_login(rita)  # a member, but not staff
    for url in (URL, f"{URL}{first.pk}.json"):
        assert client.get(url)["Location"].startswith("/admin/login/")


def test_staff_outside_the_evaluation_organization_see_no_run(two_runs, rita):
    client = staff_client(rita)  # staff of acme only
    page = " ".join(client.get(URL).content.decode().split())
    assert "No evaluation run yet" not in page  # runs exist: the page says why none is shown, and who sees them
    assert "No evaluation run you may see: 2 runs of the operators" in page
    assert "are stored, shown to superusers and to members of the evaluation organization, <code>eval</code>" in page
    globex_run = eval_run("globex-suite", bundle("g"), hours_ago=0, cases=[("todo", "deployed", "full", 5, False, "0")])
    EvalRun.objects.filter(pk=globex_run.pk).update(organization=Organization.objects.create(slug="globex", name="G"))
    assert "2 runs of the operators" in " ".join(client.get(URL).content.decode().split())  # not globex's number
    assert client.get(f"{URL}{two_runs[0].pk}.json").status_code == 404
    Membership.objects.create(user=rita, organization=Organization.objects.create(slug="eval", name="Evaluations"),
                              role="admin")
    assert "Suite offline" in client.get(URL).content.decode()



def test_staff_see_their_organizations_runs_and_not_the_shared_ones(two_runs, rita, acme):
    theirs = eval_run("acme-suite", bundle("e"), hours_ago=0, cases=[("todo", "deployed", "full", 5, False, "0.1")])
    EvalRun.objects.filter(pk=theirs.pk).update(organization=acme)
    html = staff_client(rita).get(URL).content.decode()  # staff of acme, not of the evaluation organization
    assert "Suite acme-suite" in html and "Suite offline" not in html
    assert staff_client(rita).get(f"{URL}{theirs.pk}.json").status_code == 200


def test_two_runs_on_two_bundles_are_listed_compared_and_charted(two_runs, admin_user, client):
    first, second = two_runs
    client.force_login(admin_user)
    html = client.get(URL).content.decode()
    rows = re.findall(r'<a href="/staff/evals/(\d+)\.json"', html)
    assert rows == [str(second.pk), str(first.pk)]  # newest first
    assert "<code>aaaaaaaaaaaa</code>" in html and "<code>bbbbbbbbbbbb</code>" in html
    assert "<td>1 / 1 / 0 / 0</td><td>1</td>" in html  # the first run: full / partial / none / error, a false pass
    # the second: tokens, the share of its input read from cache (6,000 of 10,000), cost, wall time
    assert "<td>2400</td><td>60%</td><td>0.4500</td><td>120.0</td>" in html
    assert "<td>2400</td><td>0%</td><td>0.3000</td><td>120.0</td>" in html  # the first read nothing
    comparison = section(html, "eval-comparison")
    assert f"Run #{second.pk} against #{first.pk}" in comparison
    todo, notes = comparison.split("<td>todo</td>")[1], comparison.split("<td>notes</td>")[1]
    assert "partial 3/5 → full 5/5" in todo and "(-0.0500)" in todo and "hidden tests, gate false pass, cost" in todo
    assert "deployed → escalated" in notes and "full 5/5 → not_run 0/5" in notes and "(+0.2000)" in notes
    hidden = re.search(r'data-chart="hidden_full">(.*?)</figure>', html, re.S).group(1)
    assert f"#{first.pk} — aaaaaaaaaaaa: 50 %" in hidden and f"#{second.pk} — bbbbbbbbbbbb: 50 %" in hidden
    cost = re.search(r'data-chart="cost">(.*?)</figure>', html, re.S).group(1)
    assert f"#{first.pk} — aaaaaaaaaaaa: 0.30" in cost and f"#{second.pk} — bbbbbbbbbbbb: 0.45" in cost


def test_an_older_run_can_be_compared_with_the_one_before_it(two_runs, admin_user, client):
    first, second = two_runs
    third = eval_run("offline", bundle("c"), hours_ago=0, cases=[("todo", "failed", "not_run", 0, False, "0")])
    client.force_login(admin_user)
    assert f"Run #{third.pk} against #{second.pk}" in client.get(URL).content.decode()
    assert f"Run #{second.pk} against #{first.pk}" in client.get(f"{URL}?run={second.pk}").content.decode()


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "9" * 5000, "1" * 19, "-1", "1.0", " 1", "abc"])
def test_a_run_parameter_that_is_not_a_plain_run_id_compares_the_newest_run(two_runs, admin_user, client, value):
    first, second = two_runs  # "²" and Arabic-Indic "١" are digits to str.isdigit; int() refuses 5000 digits
    client.force_login(admin_user)
    response = client.get(URL, {"run": value})
    assert response.status_code == 200
    assert f"Run #{second.pk} against #{first.pk}" in response.content.decode()


def test_the_export_is_what_aiteam_eval_export_prints(two_runs, admin_user, client):
    first, _ = two_runs
    client.force_login(admin_user)
    response = client.get(f"{URL}{first.pk}.json")
    printed = StringIO()
    call_command("aiteam_eval", "export", str(first.pk), stdout=printed)
    assert response["Content-Type"] == "application/json"
    assert response.json() == json.loads(printed.getvalue())
    assert response.json()["summary"]["gate_false_passes"] == 1 and len(response.json()["cases"]) == 2
    assert client.get(f"{URL}{first.pk + 100}.json").status_code == 404


@pytest.mark.parametrize("runs", [4, 40])
def test_the_page_costs_the_same_queries_for_4_or_40_runs(admin_user, client, runs, django_assert_max_num_queries):
    prompts = [bundle("a"), bundle("b")]
    for i in range(runs):
        eval_run(f"suite{i % 2}", prompts[i % 2], hours_ago=runs - i,
                 cases=[(f"case{n}", "deployed", "full", 5, False, "0.01") for n in range(4)])
    client.force_login(admin_user)
    # session, user, the runs with their totals, the compared runs' cases, the header's unread count, the menu's
    # roles (whether to offer "Add" beside pre-authorizations: lifecycle/admin_access.py)
    with django_assert_max_num_queries(6):
        response = client.get(URL)
    assert response.status_code == 200 and response.content.decode().count('class="eval-suite"') == 2


def test_an_unfinished_run_is_marked_and_never_the_baseline_of_a_comparison(two_runs, admin_user, client):
    first, second = two_runs
    interrupted = eval_run("offline", bundle("c"), hours_ago=0.5, cases=[("todo", "failed", "not_run", 0, False, "0")])
    EvalRun.objects.filter(pk=interrupted.pk).update(finished_at=None)  # killed after its first case
    newest = eval_run("offline", bundle("d"), hours_ago=0, cases=[("todo", "deployed", "full", 5, False, "0.1"),
                                                                  ("notes", "deployed", "full", 5, False, "0.1")])
    client.force_login(admin_user)
    html = client.get(URL).content.decode()
    assert html.count('<strong class="unfinished">unfinished</strong>') == 1
    comparison = section(html, "eval-comparison")
    assert f"Run #{newest.pk} against #{second.pk}" in comparison and "gone" not in comparison
    assert f"Run #{interrupted.pk} against #{second.pk}" in client.get(URL, {"run": interrupted.pk}).content.decode()
    EvalRun.objects.filter(pk=newest.pk).update(finished_at=None)  # still running: the newest finished is compared
    assert f"Run #{second.pk} against #{first.pk}" in client.get(URL).content.decode()
