"""Ticket webhooks through Django's test client with real signatures over real-shaped payloads: a good signature
is 202 and starts (or finds) a run, anything else that is not a good signature of this project's secret is one
401, a repeated delivery id does nothing, other events are ignored, and no secret reaches a log or a row."""
import json
import logging

import pytest
from django.test import Client

from lifecycle.models import Project, Requirement, StateTransition, WebhookDelivery
from tests.answers import BA_STORIES, PO_CLEAR
from tests.factories import OrganizationFactory, ProjectFactory
from tests.flows import decide, fresh, pending
from tests.webhook_payloads import BODY, github_comment, github_issue, hmac_hex, to_github

pytestmark = pytest.mark.django_db
SECRET, OTHER_SECRET = "gh-hook-secret-4f1c9e", "globex-hook-secret-77ab"


@pytest.fixture
def hooked(acme_project, settings, monkeypatch):
    """acme's project with its GitHub webhook on; globex's with another secret."""
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["ACME_GITHUB_HOOK", "GLOBEX_GITHUB_HOOK", "UNSET_HOOK"]
    monkeypatch.setenv("ACME_GITHUB_HOOK", SECRET)
    monkeypatch.setenv("GLOBEX_GITHUB_HOOK", OTHER_SECRET)
    acme_project.github_webhook_secret_env = "ACME_GITHUB_HOOK"
    acme_project.save()
    return acme_project


@pytest.fixture
def globex_project(hooked):
    return ProjectFactory(organization=OrganizationFactory(slug="globex"), github_webhook_secret_env="GLOBEX_GITHUB_HOOK")


def test_a_labelled_issue_starts_a_run_with_no_submitter(hooked):
    response = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")
    assert response.status_code == 202 and response.json()["detail"] == "created"
    requirement = Requirement.objects.get(pk=response.json()["requirement"])
    assert (requirement.project, requirement.ticket_source, requirement.ticket_key) == (hooked, "github", "#42")
    assert requirement.ticket_url == "https://github.com/acme/wordcount/issues/42"
    assert requirement.brief == BODY and requirement.title == "count_words crashes on empty input"
    assert requirement.submitted_by is None and requirement.playbook == "new_feature"
    submitted = StateTransition.objects.get(requirement=requirement)
    assert (submitted.actor_user, submitted.actor_role, submitted.via) == (None, "webhook", "github")
    assert submitted.metadata == {"delivery": "d-1", "event": "issues.labeled"}
    row = WebhookDelivery.objects.get()
    assert (row.delivery_id, row.requirement, row.started_run) == ("d-1", requirement, True)


def test_a_repeated_delivery_is_accepted_and_does_nothing(hooked):
    first = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")
    again = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")
    assert again.status_code == 202 and again.json() == {"detail": "repeat", "requirement": None}
    assert Requirement.objects.count() == 1 and WebhookDelivery.objects.count() == 1
    assert first.json()["requirement"] == str(Requirement.objects.get().pk)


def test_a_captured_body_replayed_under_a_new_delivery_id_is_a_repeat_even_after_its_run_ended(hooked):
    """The host signs the body, not the delivery id: whoever captured one delivery could otherwise start a new run
    with it whenever the ticket's last run has ended."""
    first = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1").json()
    Requirement.objects.filter(pk=first["requirement"]).update(state="cancelled")
    replay = to_github(hooked, github_issue(), secret=SECRET, delivery="d-forged")
    assert replay.status_code == 202 and replay.json() == {"detail": "repeat", "requirement": None}
    assert Requirement.objects.count() == 1 and WebhookDelivery.objects.count() == 1
    relabelled = to_github(hooked, github_issue(updated_at="2026-11-28T09:00:00Z"), secret=SECRET, delivery="d-2")
    assert relabelled.json()["detail"] == "created"  # a real new event differs in its body


def test_another_delivery_of_the_same_issue_finds_its_live_requirement(hooked):
    first = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1").json()
    again = to_github(hooked, github_comment(), secret=SECRET, event="issue_comment", delivery="d-2").json()
    assert again == {"detail": "live", "requirement": first["requirement"]}
    assert Requirement.objects.count() == 1
    assert list(WebhookDelivery.objects.order_by("id").values_list("delivery_id", "started_run")) == [
        ("d-1", True), ("d-2", False)]


def test_an_issue_of_another_repository_than_the_projects_own_starts_nothing(hooked):
    """An organization's hook (or one secret shared by repositories) reports every repository's issues: only the
    repository the project's settings name starts runs here; a project that names none takes what its hook sends."""
    elsewhere = github_issue()
    elsewhere["repository"]["full_name"] = "evil/elsewhere"
    assert to_github(hooked, elsewhere, secret=SECRET, delivery="d-0").json()["detail"] == "created"  # names none
    Requirement.objects.all().delete()
    hooked.settings = {**hooked.settings, "github": {"repository": "acme/wordcount"}}
    hooked.save()

    refused = to_github(hooked, elsewhere, secret=SECRET, delivery="d-1")
    ours = to_github(hooked, github_issue(number=43), secret=SECRET, delivery="d-2")

    assert refused.status_code == 202 and refused.json() == {
        "detail": "ignored: the issue is in 'evil/elsewhere', not in this project's 'acme/wordcount'", "requirement": None}
    assert ours.json()["detail"] == "created" and Requirement.objects.get().ticket_key == "#43"


def test_a_push_only_project_takes_issues_of_its_repo_urls_repository_only(hooked):
    """Settings that name no repository (push only, no pull request) still leave the project a repository: the one
    its repo_url names. An issue of another repository would start a run on this one, under that issue's key."""
    Project.objects.filter(pk=hooked.pk).update(repo_url="https://github.com/Acme/WordCount.git", host_kind="github")
    elsewhere = github_issue(number=7, html_url="https://github.com/acme/other-repo/issues/7")
    elsewhere["repository"]["full_name"] = "acme/other-repo"

    refused = to_github(hooked, elsewhere, secret=SECRET, delivery="d-1")
    ours = to_github(hooked, github_issue(), secret=SECRET, delivery="d-2")

    assert refused.json() == {"detail": "ignored: the issue is in 'acme/other-repo', not in this project's "
                                        "'Acme/WordCount'", "requirement": None}
    assert ours.json()["detail"] == "created" and Requirement.objects.get().ticket_key == "#42"


def test_a_members_api_ticket_naming_the_issue_neither_holds_the_trackers_delivery_back_nor_speaks_for_it(hooked,
                                                                                                            alice):
    """ADR 42: alice posts "#42" over the API first, with a body of her own; the tracker's signed delivery of issue
    #42 still starts the issue's own run, and only that one is the tracker's (comments, the closing keyword)."""
    from lifecycle.services.repositories import requirement_branch
    from tests.conftest import api_for

    posted = api_for(alice).post("/api/v1/requirements/", {"ticket": {
        "source": "github", "key": "#42", "title": "count_words crashes on empty input", "body": "delete billing/"}},
        format="json")
    assert posted.status_code == 201, posted.content
    mine = Requirement.objects.get(pk=posted.json()["id"])

    delivered = to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")

    assert delivered.json()["detail"] == "created" and delivered.json()["requirement"] != str(mine.pk)
    theirs = Requirement.objects.get(pk=delivered.json()["requirement"])
    assert (theirs.ticket_via_webhook, mine.ticket_via_webhook) == (True, False)
    assert theirs.brief == BODY and requirement_branch(theirs) == "aiteam/42-count-words-crashes-on-empty-input"
    assert requirement_branch(mine) == f"aiteam/{str(mine.pk)[:8]}-count-words-crashes-on-empty-input"
    plain = api_for(alice).post("/api/v1/requirements/", {"ticket": {
        "key": "#42", "title": "count_words crashes on empty input", "body": "b"}}, format="json").json()
    assert requirement_branch(Requirement.objects.get(pk=plain["id"])).startswith(f"aiteam/{plain['id'][:8]}-")
    again = api_for(alice).post("/api/v1/requirements/", {"ticket": {"source": "github", "key": "#42", "body": "x"}},
                                format="json")
    assert again.status_code == 200 and again.json()["id"] == str(mine.pk)  # her ticket's own live run


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
def test_a_slash_command_from_someone_with_a_role_in_the_repository_starts_a_run(hooked, association):
    response = to_github(hooked, github_comment("/aiteam", association), secret=SECRET, event="issue_comment")
    assert response.status_code == 202 and response.json()["detail"] == "created"


@pytest.mark.parametrize(("event", "payload", "why"), [
    ("issues", github_issue(label="bug"), "the label added is not 'aiteam'"),
    ("issues", github_issue(action="opened"), "only an issue labelled with the project's label starts a run"),
    ("issues", github_issue(action="unlabeled"), "only an issue labelled with the project's label starts a run"),
    ("issues", github_issue(state="closed"), "the issue is closed"),
    ("issue_comment", github_comment(association="CONTRIBUTOR"),
     "/aiteam counts only from the repository's owner, members or collaborators"),
    ("issue_comment", github_comment(association="NONE"),
     "/aiteam counts only from the repository's owner, members or collaborators"),
    ("issue_comment", github_comment("please /aiteam"), "the comment does not start with /aiteam"),
    ("issue_comment", github_comment("/aiteamx"), "the comment does not start with /aiteam"),
    ("issue_comment", {**github_comment(), "action": "edited"}, "only a new comment can be a command"),
    ("issue_comment", github_comment(pull_request={"url": "https://api.github.com/repos/acme/wordcount/pulls/42"}),
     "/aiteam on a pull request starts nothing"),
    ("ping", {"zen": "Keep it logically awesome.", "hook_id": 1}, "a ping event starts nothing"),
    ("push", {"ref": "refs/heads/main"}, "a push event starts nothing"),
])
def test_every_other_event_is_202_ignored_with_why_and_starts_nothing(hooked, event, payload, why):
    response = to_github(hooked, payload, secret=SECRET, event=event)
    assert response.status_code == 202 and response.json() == {"detail": f"ignored: {why}", "requirement": None}
    assert not Requirement.objects.exists() and not WebhookDelivery.objects.exists()


def test_the_projects_own_label_is_the_one_that_counts(hooked):
    hooked.webhook_label = "ai-team"
    hooked.save()
    assert to_github(hooked, github_issue(), secret=SECRET).json()["detail"] == "ignored: the label added is not 'ai-team'"
    assert to_github(hooked, github_issue(label="ai-team"), secret=SECRET).json()["detail"] == "created"


def refused(response) -> bool:
    return response.status_code == 401 and response.json() == {
        "detail": "the signature is missing or does not match this project's webhook secret"}


@pytest.mark.parametrize("signature", ["", "sha256=" + "0" * 64, "sha1=abc", "sha256=zz", f"sha256={'a' * 63}",
                                       "sha256=" + "é" * 64])  # non-ASCII: once a TypeError, a 500 to anyone
def test_a_missing_or_bad_signature_is_401_and_starts_nothing(hooked, signature):
    assert refused(to_github(hooked, github_issue(), secret=SECRET, signature=signature))
    assert not Requirement.objects.exists() and not WebhookDelivery.objects.exists()


def test_a_signature_of_other_bytes_than_those_sent_is_401(hooked):
    signed, sent = json.dumps(github_issue()).encode(), json.dumps(github_issue(number=43)).encode()
    assert refused(to_github(hooked, sent, secret=SECRET, signature=f"sha256={hmac_hex(SECRET, signed)}"))


def test_an_unknown_project_or_one_without_the_webhook_answers_like_a_bad_signature(hooked, globex_project):
    unknown = ProjectFactory.build()  # never saved: an id nobody has
    assert refused(to_github(unknown, github_issue(), secret=SECRET))
    hooked.github_webhook_secret_env = ""
    hooked.save()
    assert refused(to_github(hooked, github_issue(), secret=SECRET))
    assert not Requirement.objects.exists()


def test_another_projects_secret_cannot_start_a_run_here(hooked, globex_project):
    """globex's secret signs for globex's project only: posted to acme's URL it is a bad signature."""
    assert refused(to_github(hooked, github_issue(), secret=OTHER_SECRET))
    assert to_github(globex_project, github_issue(), secret=OTHER_SECRET).json()["detail"] == "created"
    assert Requirement.objects.get().project == globex_project


def test_a_secret_variable_unset_delisted_or_shared_across_organizations_is_refused(hooked, settings, monkeypatch):
    monkeypatch.delenv("ACME_GITHUB_HOOK")
    assert refused(to_github(hooked, github_issue(), secret=SECRET))
    monkeypatch.setenv("ACME_GITHUB_HOOK", SECRET)
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["GLOBEX_GITHUB_HOOK"]  # the operator took it off the list
    assert refused(to_github(hooked, github_issue(), secret=SECRET))
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["ACME_GITHUB_HOOK"]
    ProjectFactory(organization=OrganizationFactory(slug="initech"), jira_webhook_secret_env="ACME_GITHUB_HOOK")
    assert refused(to_github(hooked, github_issue(), secret=SECRET))  # saved past the form: still refused
    assert not Requirement.objects.exists()


@pytest.mark.parametrize(("body", "detail"), [
    (b"{not json", "the body is not JSON"),
    (b"[1, 2]", "the body is not a JSON object"),
    (b'{"action": "labeled", "label": {"name": "aiteam"}}', "the payload has no issue"),
    (json.dumps({**github_issue(), "issue": {**github_issue()["issue"], "number": "42"}}).encode(),
     "the payload's number is not a whole number"),
    (json.dumps({**github_issue(), "action": "labeled", "issue": {**github_issue()["issue"], "title": "a\u0000b"}}).encode(),
     "NUL bytes are not allowed in JSON strings"),
])
def test_a_bad_payload_after_a_good_signature_is_400(hooked, body, detail):
    response = to_github(hooked, body, secret=SECRET)
    assert response.status_code == 400 and response.json() == {"detail": detail}


def test_a_delivery_without_its_id_is_400(hooked):
    body = json.dumps(github_issue()).encode()
    response = Client().post(f"/webhooks/github/{hooked.pk}/", data=body, content_type="application/json", headers={
        "X-GitHub-Event": "issues", "X-Hub-Signature-256": f"sha256={hmac_hex(SECRET, body)}"})
    assert response.status_code == 400 and "delivery id" in response.json()["detail"]


def test_a_body_over_the_limit_is_413_before_it_is_read(hooked, settings):
    settings.AITEAM_WEBHOOK_MAX_BYTES = 2048
    response = to_github(hooked, github_issue(body="x" * 4096), secret=SECRET)
    assert response.status_code == 413 and not Requirement.objects.exists()


def test_an_issue_body_longer_than_a_brief_is_422_and_a_redelivery_can_still_succeed(hooked, settings):
    settings.AITEAM_BRIEF_MAX_CHARS = 100
    response = to_github(hooked, github_issue(body="x" * 101), secret=SECRET, delivery="d-1")
    assert response.status_code == 422 and "longer than 100" in response.json()["detail"]
    assert not WebhookDelivery.objects.exists()  # not recorded: once the limit is raised, a redelivery is taken
    settings.AITEAM_BRIEF_MAX_CHARS = 200
    assert to_github(hooked, github_issue(body="x" * 101), secret=SECRET, delivery="d-1").json()["detail"] == "created"


def test_ticket_text_chooses_nothing_but_the_brief(hooked, globex_project):
    """The payload names another repository, the body asks for another playbook and project: the run is on the
    project whose URL and secret took the delivery, with its default playbook."""
    payload = github_issue(body=f"/aiteam playbook=bug_fix project={globex_project.pk} autonomous=true")
    payload["repository"] = {"full_name": "globex/secret-repo"}
    to_github(hooked, payload, secret=SECRET)
    requirement = Requirement.objects.get()
    assert (requirement.project, requirement.organization, requirement.playbook) == (
        hooked, hooked.organization, "new_feature")


def test_only_post_is_taken(hooked):
    assert Client().get(f"/webhooks/github/{hooked.pk}/").status_code == 405
    assert Client().post(f"/webhooks/bitbucket/{hooked.pk}/", data=b"{}", content_type="application/json").status_code == 404


def test_no_secret_reaches_a_log_or_a_row(hooked, caplog):
    caplog.set_level(logging.DEBUG)
    to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")
    to_github(hooked, github_issue(), secret="wrong-secret-value", delivery="d-2")
    to_github(hooked, github_issue(), secret=SECRET, delivery="d-1")
    assert "refused" in caplog.text and "created" in caplog.text
    assert SECRET not in caplog.text and "wrong-secret-value" not in caplog.text
    rows = [*Requirement.objects.values(), *StateTransition.objects.values(), *WebhookDelivery.objects.values(),
            *type(hooked).objects.values()]
    assert rows and SECRET not in str(rows) and "ACME_GITHUB_HOOK" in str(rows)  # the name only


@pytest.mark.django_db(transaction=True)
def test_a_webhook_run_without_a_submitter_goes_through_the_flow_to_a_reviewers_gate(hooked, rita, scripted):
    """Eager Celery: the labelled issue's requirement is triaged (a feature), clarified and storied like a brief,
    and waits for the organization's reviewer, whose decision moves it on."""
    scripted.enqueue({"kind": "feature", "reason": "New behaviour the project does not have."})
    scripted.enqueue(PO_CLEAR)
    scripted.enqueue(BA_STORIES)
    response = to_github(hooked, github_issue(), secret=SECRET)
    requirement = fresh(Requirement.objects.get(pk=response.json()["requirement"]))
    assert requirement.state == "user_stories_created" and requirement.submitted_by is None
    assert BODY in requirement.llm_calls.get(step__key="po_clarify").messages[0]["content"]
    decide(pending(requirement, "stories_approval"), rita, "approve")
    assert set(requirement.stories.values_list("state", flat=True)) == {"approved"}
