"""Hostile input to the API, the ticket webhooks and Slack is a clear 4xx (or, for Slack events, an ignore with its
reason), never a 500, on SQLite and PostgreSQL alike (`make test-unit-pg` runs this module there too):

- an unpaired surrogate ("\\ud800" in JSON text) is refused wherever JSON is parsed: neither database can store it,
  and DRF's JSON renderer cannot encode an error that repeats it;
- a value longer than the column it is stored in (a GitLab action in WebhookDelivery.event, a Slack channel or ts in
  SlackMessageSeen) is refused before it is written: PostgreSQL refused it with a DataError, SQLite stored it;
- an error repeats at most ECHO_MAX_CHARS of a refused value or field name, marked as cut."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from urllib.parse import urlencode

import pytest
from django.test import Client

from lifecycle import playbooks
from lifecycle.api.parsers import json_problem
from lifecycle.errors import ECHO_MAX_CHARS, ECHO_MAX_NAMES, DomainError
from lifecycle.models import (
    Conversation,
    ConversationChannelBinding,
    Project,
    PromotionDecision,
    Requirement,
    ReviewTask,
    SlackIdentity,
    SlackMessageSeen,
    SlackWorkspace,
    WebhookDelivery,
)
from lifecycle.services.promotions import bundle_with
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory, project_form_data
from tests.review_tasks import open_review
from tests.webhook_payloads import github_issue, gitlab_issue, jira_issue, to_github, to_gitlab, to_jira

pytestmark = pytest.mark.django_db
SURROGATE = "\\ud800"  # as JSON text: a high surrogate with no low half after it
REFUSED = "unpaired surrogates"
BIG = "y" * (1024 * 1024)


def assert_400(response, words: str = "") -> dict:
    """A JSON 400 whose body is valid UTF-8 and holds no surrogate (the renderer could encode it)."""
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    text = response.content.decode("utf-8")  # strict: a surrogate could not have been encoded
    assert words in text, text[:300]
    return response.json()


def raw(client, url: str, body: str, method: str = "post"):
    return getattr(client, method)(url, body, content_type="application/json")


@pytest.fixture
def ada(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="ada").user


@pytest.fixture
def task(acme_project):
    return open_review(acme_project)


# --- json_problem itself

@pytest.mark.parametrize("data", [
    "\ud800", "ok \udfff", {"\ud800": 1}, {"a": ["b", {"c": "x\udc00y"}]}, ["\ud83d"],
])
def test_an_unpaired_surrogate_anywhere_is_a_problem_that_does_not_repeat_it(data):
    problem = json_problem(data, 32)
    assert problem and REFUSED in problem
    problem.encode("utf-8")  # the message itself never carries the character


@pytest.mark.parametrize("text", ['"caf\\u00e9"', '"\\ud83d\\ude00 a pair is one character"', '"日本語"'])
def test_paired_surrogates_and_other_non_ascii_text_pass(text):
    assert json_problem(json.loads(text), 32) is None


# --- the API: every JSON entry refuses a surrogate with a 400 that names the problem, not the value

def _with(template: str, **values: object) -> str:
    """`template` with § for the surrogate and {name} for each of `values`."""
    return template.replace("§", SURROGATE).replace("{p}", str(values.get("p", "")))


def _promotion(p, **fields) -> str:
    body = {"project": str(p.pk), "artifact": "playbooks", "candidate": {}, "current_run": 1, "candidate_run": 2,
            "expected_effect": "x"}
    return json.dumps({**body, **fields}).replace("SURROGATE", SURROGATE)


REQUIREMENTS = "/api/v1/requirements/"
API_CASES = {
    "decision value": ("rita", lambda t, p: (f"/api/v1/review-tasks/{t.pk}/decision/", _with('{"decision": "§"}'))),
    "decision unknown field": ("rita", lambda t, p: (f"/api/v1/review-tasks/{t.pk}/decision/",
                                                     _with('{"decision": "approve", "§": 1}'))),
    "decision reason": ("rita", lambda t, p: (f"/api/v1/review-tasks/{t.pk}/decision/",
                                              _with('{"decision": "reject", "reason": "§"}'))),
    "playbook": ("alice", lambda t, p: (REQUIREMENTS, _with('{"brief": "b", "project": "{p}", "playbook": "§"}', p=p.pk))),
    "unknown field": ("alice", lambda t, p: (REQUIREMENTS, _with('{"brief": "b", "project": "{p}", "§": 1}', p=p.pk))),
    "ticket.source": ("alice", lambda t, p: (REQUIREMENTS, _with(
        '{"project": "{p}", "ticket": {"source": "§", "key": "K-1", "body": "b"}}', p=p.pk))),
    "ticket unknown field": ("alice", lambda t, p: (REQUIREMENTS, _with(
        '{"project": "{p}", "ticket": {"key": "K-1", "body": "b", "§": 1}}', p=p.pk))),
    "ticket.title": ("alice", lambda t, p: (REQUIREMENTS, _with(
        '{"project": "{p}", "ticket": {"key": "K-1", "title": "§"}}', p=p.pk))),
    "retriage playbook": ("rita", lambda t, p: (f"/api/v1/requirements/{t.requirement_id}/retriage/",
                                                _with('{"playbook": "§", "reason": "r"}'))),
    "cancel reason": ("ada", lambda t, p: (f"/api/v1/requirements/{t.requirement_id}/cancel/", _with('{"reason": "§"}'))),
    "promotion artifact": ("ada", lambda t, p: ("/api/v1/promotions/", _promotion(p, artifact="SURROGATE"))),
    "promotion candidate key": ("ada", lambda t, p: ("/api/v1/promotions/", _promotion(p, candidate={"SURROGATE": "x"}))),
    "conversation text": ("alice", lambda t, p: ("/api/v1/conversations/", _with('{"text": "§"}'))),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_a_surrogate_in_any_json_field_name_or_value_is_a_400(case, acme_project, task, alice, rita, ada):
    who, make = API_CASES[case]
    url, body = make(task, acme_project)
    client = api_for({"alice": alice, "rita": rita, "ada": ada}[who])
    assert_400(raw(client, url, body), REFUSED)
    assert Requirement.objects.count() == 1 and not PromotionDecision.objects.exists()
    assert ReviewTask.objects.get(pk=task.pk).is_pending and not Conversation.objects.exists()


def test_a_form_encoded_or_query_string_surrogate_arrives_as_a_replacement_character(task, rita):
    """Only a JSON escape can make one: form fields and query strings are decoded from bytes, U+FFFD for bad UTF-8."""
    form = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", "decision=%ED%A0%80",
                              content_type="application/x-www-form-urlencoded")
    assert "is not a valid choice" in json.dumps(assert_400(form))
    query = api_for(rita).get(f"/api/v1/requirements/{task.requirement_id}/routing/?route=%ED%A0%80")
    assert "is not a valid choice" in json.dumps(assert_400(query))
    unknown = api_for(rita).get(f"/api/v1/requirements/{task.requirement_id}/routing/?%ED%A0%80=1")
    assert assert_400(unknown) == {"\ufffd\ufffd\ufffd": ["unknown field"]}


# --- what an error repeats of the input is cut

def test_a_megabyte_decision_comes_back_as_a_short_error(task, rita):
    errors = assert_400(api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": BIG},
                                           format="json"))
    message = errors["decision"][0]
    assert message == f'"{"y" * ECHO_MAX_CHARS}… ({len(BIG)} characters in all)" is not a valid choice.'


def test_a_short_invalid_choice_is_repeated_whole(task, rita):
    errors = assert_400(api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": "maybe"},
                                           format="json"))
    assert errors == {"decision": ['"maybe" is not a valid choice.']}


@pytest.mark.parametrize("body", [
    lambda name: {"brief": "b", name: 1},
    lambda name: {"ticket": {"key": "K-1", "body": "b", name: 1}},
], ids=["top-level", "in ticket"])
def test_an_unknown_field_name_is_repeated_cut(alice, body):
    name = "n" * 5000
    errors = assert_400(api_for(alice).post("/api/v1/requirements/", body(name), format="json"))
    shown = f"{'n' * ECHO_MAX_CHARS}… (5000 characters in all)"
    assert errors in ({shown: ["unknown field"]}, {"ticket": {shown: ["unknown field"]}})
    assert len(json.dumps(errors)) < 300


@pytest.mark.parametrize("body", [
    lambda names: {"brief": "b", **names},
    lambda names: {"ticket": {"key": "K-1", "body": "b", **names}},
], ids=["top-level", "in ticket"])
def test_a_hundred_thousand_unknown_fields_name_the_first_few_and_count_the_rest(alice, body):
    names = {f"k{i:06d}": 1 for i in range(100_000)}
    errors = assert_400(api_for(alice).post("/api/v1/requirements/", body(names), format="json"))
    errors = errors.get("ticket", errors)
    assert list(errors) == [f"k{i:06d}" for i in range(ECHO_MAX_NAMES)] + ["non_field_errors"]
    assert errors["k000000"] == ["unknown field"]
    assert errors["non_field_errors"] == [f"and {100_000 - ECHO_MAX_NAMES} more unknown fields"]


def test_unknown_fields_beside_a_known_fields_error_are_capped_too(task, rita):
    body = {"decision": "maybe", **{f"x{i:02d}": 1 for i in range(ECHO_MAX_NAMES + 5)}}
    errors = assert_400(api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", body, format="json"))
    assert errors.pop("decision") == ['"maybe" is not a valid choice.']
    assert errors == {**{f"x{i:02d}": ["unknown field"] for i in range(ECHO_MAX_NAMES)},
                      "non_field_errors": ["and 5 more unknown fields"]}


@pytest.mark.parametrize(("url", "body", "field"), [
    ("/api/v1/requirements/{req}/retriage/", {"reason": "r"}, "playbook"),
    ("/api/v1/requirements/", {"brief": "b"}, "playbook"),
    ("/api/v1/requirements/", {"ticket": {"key": "K-1", "body": "b"}}, "ticket"),
    ("/api/v1/meta-eval/?kind=", None, "kind"),
    ("/api/v1/requirements/{req}/routing/?route=", None, "route"),
])
def test_other_choice_fields_repeat_a_long_value_cut(task, ada, url, body, field):
    url, long = url.format(req=task.requirement_id), "k" * 3000
    if body is None:
        response = api_for(ada).get(url + long)
    elif field == "ticket":
        response = api_for(ada).post(url, {"ticket": {**body["ticket"], "source": long}}, format="json")
    else:
        response = api_for(ada).post(url, {**body, field: long}, format="json")
    errors = assert_400(response)
    errors = errors["ticket"] if field == "ticket" else errors
    field = "source" if field == "ticket" else field
    assert f"{'k' * ECHO_MAX_CHARS}… (3000 characters in all)" in errors[field][0] and len(errors[field][0]) < 200


def test_a_playbook_table_lists_ten_problems_each_name_cut():
    table = {f"kind{i}-" + "x" * 500: "no_such_playbook" for i in range(40)}
    problems = playbooks.table_problems(table)
    assert len(problems) == 11 and problems[-1] == "and 70 more"
    assert all(len(problem) < 300 for problem in problems)


@pytest.mark.parametrize("budget", [
    {"roles": {f"r{i}": {} for i in range(100_000)}},
    {"requirement": {"tokens": 5}, **{f"k{i}": 1 for i in range(100_000)}},
    {"requirement": {f"d{i}": 1 for i in range(100_000)}},
], ids=["unknown roles", "unknown keys", "unknown dimensions"])
def test_a_budget_override_lists_ten_problems_and_counts_the_rest(acme_project, rita, budget):
    task = open_review(acme_project, kind="budget_exhausted", stories=0)
    errors = assert_400(api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/",
                                           {"decision": "override_budget", "budget": budget}, format="json"))
    message = errors["budget"][0]
    assert message.endswith(f"; and {100_000 - ECHO_MAX_NAMES} more") and len(message) < 2000, message[:300]
    assert ReviewTask.objects.get(pk=task.pk).is_pending


def test_unknown_prompt_names_of_a_candidate_are_listed_cut(acme_project):
    with pytest.raises(DomainError) as refused:
        bundle_with(acme_project, {f"{i}-" + "p" * 1000: "text" for i in range(30)})
    assert len(str(refused.value)) < 2000 and str(refused.value).endswith("and 20 more]")


# --- the ticket webhooks: a surrogate is a 400 before anything is stored

GH, GL, JR = "gh-hostile-secret", "gl-hostile-token", "jira-hostile-secret"


@pytest.fixture
def hooked(acme_project, settings, monkeypatch):
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["H_GH", "H_GL", "H_JR"]
    for env, value in (("H_GH", GH), ("H_GL", GL), ("H_JR", JR)):
        monkeypatch.setenv(env, value)
    acme_project.github_webhook_secret_env, acme_project.gitlab_webhook_secret_env = "H_GH", "H_GL"
    acme_project.jira_webhook_secret_env = "H_JR"
    acme_project.save()
    return acme_project


def _jira_summary(text: str) -> dict:
    payload = jira_issue()
    payload["issue"]["fields"]["summary"] = text
    return payload


@pytest.mark.parametrize("send", [
    lambda p: to_github(p, github_issue(title="\ud800"), secret=GH),
    lambda p: to_github(p, github_issue(body="ok \ud800"), secret=GH),
    lambda p: to_github(p, github_issue(html_url="https://github.com/acme/wordcount/issues/\ud800"), secret=GH),
    lambda p: to_gitlab(p, gitlab_issue(title="\ud800"), token=GL),
    lambda p: to_jira(p, _jira_summary("\ud800"), secret=JR),
    lambda p: to_github(p, {**github_issue(), "\udfff": 1}, secret=GH),
], ids=["github title", "github body", "github url", "gitlab title", "jira summary", "a key"])
def test_a_signed_webhook_with_a_surrogate_is_a_400_and_stores_nothing(hooked, send):
    assert_400(send(hooked), REFUSED)
    assert not Requirement.objects.exists() and not WebhookDelivery.objects.exists()


def test_a_gitlab_action_longer_than_the_event_column_is_a_400_and_stores_nothing(hooked):
    assert_400(to_gitlab(hooked, gitlab_issue(action="u" * 300), token=GL), "longer than 100 characters")
    assert not Requirement.objects.exists() and not WebhookDelivery.objects.exists()
    ignored = to_gitlab(hooked, gitlab_issue(action="u" * 300, previous=["aiteam"]), token=GL)  # not stored anyway
    assert ignored.status_code == 202 and ignored.json()["detail"].startswith("ignored:")


def test_a_gitlab_action_that_fits_is_recorded(hooked):
    action = "u" * (100 - len("Issue Hook."))
    assert to_gitlab(hooked, gitlab_issue(action=action), token=GL).status_code == 202
    assert WebhookDelivery.objects.get().event == f"Issue Hook.{action}"


LONG_EVENT = "E" * 100_000


@pytest.mark.parametrize("send", [
    lambda p: to_jira(p, {**jira_issue(), "webhookEvent": LONG_EVENT}, secret=JR),
    lambda p: to_gitlab(p, gitlab_issue(), token=GL, event=LONG_EVENT),
    lambda p: to_gitlab(p, {**gitlab_issue(action=LONG_EVENT), "object_kind": "note"}, token=GL),
    lambda p: to_gitlab(p, gitlab_issue(action=LONG_EVENT, previous=["aiteam"]), token=GL),
    lambda p: to_github(p, github_issue(), secret=GH, event=LONG_EVENT),
    lambda p: to_github(p, github_issue(action=LONG_EVENT), secret=GH),
], ids=["jira webhookEvent", "gitlab event", "gitlab action, not an issue", "gitlab action, no label",
        "github event", "github action"])
def test_an_ignored_events_long_name_is_answered_and_logged_cut(hooked, caplog, send):
    caplog.set_level(logging.INFO, logger="lifecycle.webhooks")
    response = send(hooked)
    assert response.status_code == 202 and response.json()["detail"].startswith("ignored:")
    assert len(response.content) < 400, response.content[:400]
    assert caplog.records and all(len(record.getMessage()) < 400 for record in caplog.records)
    assert not WebhookDelivery.objects.exists()


# --- Slack

SLACK_SECRET, TEAM = "slack-hostile-secret", "T0ACME"
EVENTS, ACTIONS = "/webhooks/slack/events/", "/webhooks/slack/interactive/"
FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def workspace(acme, rita, monkeypatch):
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    workspace = SlackWorkspace.objects.create(organization=acme, team_id=TEAM, bot_token_env="SLACK_BOT_TOKEN")
    SlackIdentity.objects.create(workspace=workspace, slack_user_id="URITA", user=rita)
    return workspace


def slack(path: str, body: bytes, content_type: str = "application/json"):
    stamp = str(int(time.time()))
    digest = hmac.new(SLACK_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return Client().post(path, data=body, content_type=content_type, HTTP_X_SLACK_REQUEST_TIMESTAMP=stamp,
                         HTTP_X_SLACK_SIGNATURE=f"v0={digest}")


def event(team: str = TEAM, **fields) -> bytes:
    message = {"type": "app_mention", "user": "URITA", "text": "<@UBOT> hi", "channel": "C1", "ts": "1700000000.000100",
               **fields}
    return json.dumps({"team_id": team, "type": "event_callback", "event_id": "Ev1", "event": message}).encode()


def press(team: str = TEAM, user: str = "URITA", value: str = "review:approve:x") -> bytes:
    payload = {"type": "block_actions", "team": {"id": team}, "user": {"id": user}, "channel": {"id": "C1"},
               "actions": [{"type": "button", "value": value}]}
    return urlencode({"payload": json.dumps(payload)}).encode()


@pytest.mark.parametrize(("path", "body"), [
    (EVENTS, lambda: event(text="hi \ud800")),
    (EVENTS, lambda: event(channel="C\ud800")),
    (EVENTS, lambda: event(team="\ud800")),
    (ACTIONS, lambda: press(user="\ud800")),
    (ACTIONS, lambda: press(team="\ud800")),
], ids=["event text", "event channel", "event team", "press user", "press team"])
def test_a_signed_slack_request_with_a_surrogate_is_a_400(workspace, path, body):
    assert_400(slack(path, body(), FORM if path == ACTIONS else "application/json"), REFUSED)
    assert not SlackMessageSeen.objects.exists() and not Conversation.objects.exists()


@pytest.mark.parametrize("fields", [
    {"ts": "9" * 500}, {"channel": "C" * 500}, {"thread_ts": "1" * 500}, {"ts": "9" * 21},
], ids=["ts", "channel", "thread_ts", "ts one too long"])
def test_a_slack_event_whose_ids_do_not_fit_is_ignored_with_why(workspace, fields):
    """Slack retries an answer other than 200 and turns off an app whose events keep failing: ignored, not 400."""
    response = slack(EVENTS, event(**fields))
    assert response.status_code == 200
    assert response.json() == {"detail": "ignored: a channel, ts or thread_ts longer than 20 characters is not Slack's"}
    assert not SlackMessageSeen.objects.exists() and not ConversationChannelBinding.objects.exists()


def test_slack_answers_repeat_at_most_a_cut_of_a_long_id(workspace, task):
    unknown_team = slack(EVENTS, event(team="T" * 5000)).json()["detail"]
    unmapped = slack(EVENTS, event(user="U" * 5000)).json()["detail"]
    pressed = slack(ACTIONS, press(user="U" * 5000), FORM)
    decision = slack(ACTIONS, press(value=f"review:{'d' * 5000}:{task.pk}"), FORM)
    assert pressed.status_code == 403 and decision.status_code == 400
    for answer in (unknown_team, unmapped, pressed.json()["detail"], decision.json()["detail"]):
        assert "(5" in answer and "characters in all)" in answer and len(answer) < 400, answer


# --- the admin's JSON boxes

def test_project_settings_with_a_surrogate_are_a_form_error(acme_project, ada):
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    response = staff_client(ada).post(url, project_form_data(acme_project, settings='{"reviewers_group": "\\ud800"}'))
    assert response.status_code == 200
    assert [REFUSED in error for error in response.context["adminform"].form.errors["settings"]] == [True]


def test_a_budget_with_a_surrogate_is_refused_on_the_review_page(acme_project, rita):
    task = open_review(acme_project, kind="budget_exhausted", stories=0)
    response = staff_client(rita).post(f"/admin/lifecycle/reviewtask/{task.pk}/decide/", {
        "decision": "override_budget", "budget": '{"\\ud800": {"steps": 3}}'})
    assert response.status_code == 400 and REFUSED in response.content.decode()
    assert ReviewTask.objects.get(pk=task.pk).is_pending


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 40 + "1" + "}" * 40, '{"x": "a\\u0000"}'])
def test_project_settings_too_deep_or_with_a_nul_are_a_form_error_shown_as_typed(acme_project, ada, text):
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    response = staff_client(ada).post(url, project_form_data(acme_project, settings=text))
    assert response.status_code == 200 and response.context["adminform"].form.errors["settings"]
    assert Project.objects.get(pk=acme_project.pk).settings == acme_project.settings
