"""GitLab (X-Gitlab-Token) and Jira (X-Hub-Signature HMAC-SHA256) issue webhooks: the label added starts a run,
a bad token or signature is 401, a repeated delivery id does nothing, anything else is ignored."""
import json

import pytest

from lifecycle.models import Requirement, WebhookDelivery
from tests.webhook_payloads import gitlab_issue, hmac_hex, jira_issue, to_gitlab, to_jira

pytestmark = pytest.mark.django_db
TOKEN, JIRA_SECRET = "gl-token-9d8c7b", "jira-secret-1a2b3c"


@pytest.fixture
def hooked(acme_project, settings, monkeypatch):
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["ACME_GITLAB_HOOK", "ACME_JIRA_HOOK"]
    monkeypatch.setenv("ACME_GITLAB_HOOK", TOKEN)
    monkeypatch.setenv("ACME_JIRA_HOOK", JIRA_SECRET)
    acme_project.gitlab_webhook_secret_env, acme_project.jira_webhook_secret_env = "ACME_GITLAB_HOOK", "ACME_JIRA_HOOK"
    acme_project.save()
    return acme_project


# --- GitLab

def test_a_gitlab_issue_given_the_label_starts_a_run(hooked):
    response = to_gitlab(hooked, gitlab_issue(previous=["bug"], current=["bug", "aiteam"]), token=TOKEN)
    assert response.status_code == 202 and response.json()["detail"] == "created"
    requirement = Requirement.objects.get()
    assert (requirement.ticket_source, requirement.ticket_key, requirement.ticket_url) == (
        "gitlab", "#23", "https://gitlab.com/acme/wordcount/-/issues/23")
    assert requirement.transitions.get().via == "gitlab" and requirement.submitted_by is None


def test_an_issue_of_another_gitlab_project_than_the_projects_own_starts_nothing(hooked):
    hooked.settings = {**hooked.settings, "gitlab": {"project": "acme/tools"}}
    hooked.save()
    response = to_gitlab(hooked, gitlab_issue(), token=TOKEN)
    assert response.json()["detail"] == "ignored: the issue is in 'acme/wordcount', not in this project's 'acme/tools'"
    hooked.settings = {**hooked.settings, "gitlab": {"project": "Acme/WordCount"}}  # GitLab paths ignore case
    hooked.save()
    assert to_gitlab(hooked, gitlab_issue(), token=TOKEN).json()["detail"] == "created"
    Requirement.objects.all().delete()
    hooked.settings = {**hooked.settings, "gitlab": {"project": "1"}}  # or its numeric id, as GitLab's API takes
    hooked.save()
    later = gitlab_issue(updated_at="2026-12-07 09:00:00 UTC")  # another event: the same body would be a repeat
    assert to_gitlab(hooked, later, token=TOKEN).json()["detail"] == "created"


def test_a_push_only_gitlab_project_takes_issues_of_its_repo_urls_project_only(hooked):
    Requirement.objects.filter(project=hooked).delete()
    type(hooked).objects.filter(pk=hooked.pk).update(repo_url="git@gitlab.com:acme/tools.git", host_kind="gitlab")
    response = to_gitlab(hooked, gitlab_issue(), token=TOKEN)
    assert response.json()["detail"] == "ignored: the issue is in 'acme/wordcount', not in this project's 'acme/tools'"
    type(hooked).objects.filter(pk=hooked.pk).update(repo_url="https://gitlab.com/acme/wordcount.git")
    assert to_gitlab(hooked, gitlab_issue(), token=TOKEN).json()["detail"] == "created"
    assert Requirement.objects.get().ticket_repository_id == "1"  # the issue's project's id, for a project named by it


def test_a_gitlab_issue_opened_with_the_label_and_no_change_list_starts_a_run(hooked):
    payload = gitlab_issue(action="open")
    del payload["changes"]
    assert to_gitlab(hooked, payload, token=TOKEN).json()["detail"] == "created"


@pytest.mark.parametrize("token", ["", "gl-token-9d8c7", "gl-token-9d8c7b ", "GL-TOKEN-9D8C7B"])
def test_a_wrong_or_missing_gitlab_token_is_401(hooked, token):
    assert to_gitlab(hooked, gitlab_issue(), token=token).status_code == 401
    assert not Requirement.objects.exists()


def test_gitlab_retries_share_an_idempotency_key_and_do_nothing_twice(hooked):
    first = to_gitlab(hooked, gitlab_issue(), token=TOKEN, key="k-1", uuid_header="u-1")
    retry = to_gitlab(hooked, gitlab_issue(), token=TOKEN, key="k-1", uuid_header="u-2")
    assert first.json()["detail"] == "created" and retry.json() == {"detail": "repeat", "requirement": None}
    assert WebhookDelivery.objects.get().delivery_id == "k-1"


def test_without_an_idempotency_key_the_event_uuid_names_the_delivery(hooked):
    to_gitlab(hooked, gitlab_issue(), token=TOKEN, uuid_header="u-1")
    assert to_gitlab(hooked, gitlab_issue(), token=TOKEN, uuid_header="u-1").json()["detail"] == "repeat"
    assert WebhookDelivery.objects.get().delivery_id == "u-1"


@pytest.mark.parametrize(("event", "payload", "why"), [
    ("Issue Hook", gitlab_issue(previous=["aiteam"], current=["aiteam", "bug"]), "the label 'aiteam' was not added"),
    ("Issue Hook", gitlab_issue(previous=["aiteam"], current=[]), "the label 'aiteam' was not added"),
    ("Issue Hook", gitlab_issue(state="closed"), "the issue is closed"),
    ("Confidential Issue Hook", gitlab_issue(),
     "a Confidential Issue Hook event starts nothing (confidential issues neither)"),
    ("Push Hook", {"object_kind": "push", "ref": "refs/heads/main"},
     "a Push Hook event starts nothing (confidential issues neither)"),
])
def test_other_gitlab_events_are_ignored(hooked, event, payload, why):
    response = to_gitlab(hooked, payload, token=TOKEN, event=event)
    assert response.status_code == 202 and response.json()["detail"] == f"ignored: {why}"
    assert not Requirement.objects.exists()


def test_a_gitlab_label_list_of_the_wrong_shape_is_400(hooked):
    payload = gitlab_issue()
    payload["changes"]["labels"]["current"] = ["aiteam"]  # titles, not label objects
    response = to_gitlab(hooked, payload, token=TOKEN)
    assert response.status_code == 400 and "not labels with titles" in response.json()["detail"]


# --- Jira

def test_a_jira_issue_updated_to_add_the_label_starts_a_run(hooked):
    response = to_jira(hooked, jira_issue(before="backend", after="backend aiteam"), secret=JIRA_SECRET)
    assert response.status_code == 202 and response.json()["detail"] == "created"
    requirement = Requirement.objects.get()
    assert (requirement.ticket_source, requirement.ticket_key, requirement.ticket_url) == (
        "jira", "PROJ-7", "https://acme.atlassian.net/browse/PROJ-7")
    assert requirement.brief == "count_words('') raises IndexError." and requirement.transitions.get().via == "jira"


def test_a_jira_issue_created_with_the_label_starts_a_run_and_a_document_description_is_read_as_text(hooked):
    document = {"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": "count_words('') raises"},
                                          {"type": "text", "text": "IndexError."}]}]}
    payload = jira_issue(event="jira:issue_created", labels=["aiteam"], description=document)
    del payload["changelog"]
    assert to_jira(hooked, payload, secret=JIRA_SECRET).json()["detail"] == "created"
    assert Requirement.objects.get().brief == "count_words('') raises IndexError."


@pytest.mark.parametrize("signature", ["", "sha256=00", "sha1=" + "a" * 40])
def test_a_bad_or_missing_jira_signature_is_401(hooked, signature):
    assert to_jira(hooked, jira_issue(), secret=JIRA_SECRET, signature=signature).status_code == 401


def test_a_jira_body_signed_with_the_gitlab_token_is_401(hooked):
    body = json.dumps(jira_issue()).encode()
    assert to_jira(hooked, body, secret=JIRA_SECRET, signature=f"sha256={hmac_hex(TOKEN, body)}").status_code == 401


def test_a_repeated_jira_delivery_does_nothing(hooked):
    to_jira(hooked, jira_issue(), secret=JIRA_SECRET, delivery="j-1")
    assert to_jira(hooked, jira_issue(), secret=JIRA_SECRET, delivery="j-1").json()["detail"] == "repeat"
    assert Requirement.objects.count() == 1


@pytest.mark.parametrize(("payload", "why"), [
    (jira_issue(before="aiteam", after="aiteam backend"), "the label 'aiteam' was not added"),
    (jira_issue(before="aiteam", after=""), "the label 'aiteam' was not added"),
    (jira_issue(event="jira:issue_created", labels=["backend"]), "the label 'aiteam' was not added"),
    (jira_issue(event="comment_created"), "a comment_created event starts nothing"),
])
def test_other_jira_events_are_ignored(hooked, payload, why):
    response = to_jira(hooked, payload, secret=JIRA_SECRET)
    assert response.status_code == 202 and response.json()["detail"] == f"ignored: {why}"
    assert not Requirement.objects.exists()


def test_a_jira_issue_address_that_is_not_http_is_400(hooked):
    payload = jira_issue()
    payload["issue"]["self"] = "javascript:alert(1)"
    assert to_jira(hooked, payload, secret=JIRA_SECRET).status_code == 400


def test_one_ticket_reported_by_two_sources_is_two_tickets(hooked):
    """GitLab's #23 and Jira's PROJ-7 are different keys of different sources: each has its own run."""
    to_gitlab(hooked, gitlab_issue(), token=TOKEN)
    to_jira(hooked, jira_issue(), secret=JIRA_SECRET)
    assert sorted(Requirement.objects.values_list("ticket_source", flat=True)) == ["gitlab", "jira"]
