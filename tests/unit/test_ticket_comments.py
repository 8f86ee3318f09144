"""Comments on a requirement's ticket (ADR 35): work started, the pull request's link, the answer or refusal of a
triaged ticket, and the real reason when the run stops; each posted once per event by the notification worker,
retried while the host's failure is transient, given up when it is not, the token never in a row or a log."""
from __future__ import annotations

import io
import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.models import Notification, OutboxEvent, Project, Requirement
from lifecycle.notifications.sending import notification_send
from lifecycle.services import outbox
from lifecycle.services.outbox import emit
from lifecycle.services.outcomes import requirement_cancel
from lifecycle.services.reviews import review_open
from lifecycle.ticket_comments import queue_ticket_comment
from tests.fakes.github_server import FakeGitHubServer
from tests.fakes.gitlab_server import FakeGitLabServer
from tests.fakes.jira_server import FakeJiraServer, plain_text
from tests.flows import decide, pending
from tests.repo_approval import SMALL_CHANGE, TOKEN, ask_for_deployment, commit_change, repository_project, repository_requirement

pytestmark = pytest.mark.django_db(transaction=True)
EMAIL = "bot@acme.example"
PREPARED = {"base_sha": "0" * 40, "branch": "aiteam/12-document-the-total", "tests": "python -m pytest -q"}


@pytest.fixture
def github(settings, monkeypatch):
    with FakeGitHubServer(TOKEN) as fake:
        fake.add_issue("acme/shop", 12)
        settings.AITEAM_GITHUB_API_URLS = [fake.url, "http://127.0.0.1:9"]
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        yield fake


def on_github(project: Project, url: str) -> Project:
    Project.objects.filter(pk=project.pk).update(host_kind="github", token_env="GITHUB_TOKEN",
                                                 settings={"github": {"repository": "acme/shop", "api_url": url}})
    return Project.objects.get(pk=project.pk)


def ticket_requirement(project: Project, source: str = "github", key: str = "#12", url: str = "",
                       via_webhook: bool = True) -> Requirement:
    """A ticket's requirement, by default as the project's signed webhook makes it."""
    return Requirement.objects.create(organization=project.organization, project=project, brief="b", title="Fix it",
                                      state="in_development", ticket_source=source, ticket_key=key, ticket_url=url,
                                      ticket_via_webhook=via_webhook)


def emitted(requirement: Requirement, name: str, payload: dict | None = None) -> OutboxEvent:
    with transaction.atomic():
        return emit(requirement, name, payload or {})


def test_work_started_is_posted_once_however_often_the_event_is_handled(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url))
    event = emitted(req, "RepositoryPrepared", PREPARED)

    [comment] = github.comments
    assert (comment["repo"], comment["issue"]) == ("acme/shop", 12)
    assert f"started work on this ticket (requirement {req.pk}), on branch `aiteam/12-document-the-total`" in comment["body"]
    row = Notification.objects.get(channel="ticket")
    assert (row.key, row.event, row.recipient, row.state, row.attempts) == (
        f"outbox:{event.pk}:ticket", "ticket_started", "#12", "sent", 1)
    with transaction.atomic():  # relayed again (a second relay, a beat after a crash): no second row
        queue_ticket_comment(OutboxEvent.objects.get(pk=event.pk))
    assert outbox.relay() == 0 and notification_send(row.pk, now=timezone.now() + timedelta(days=1)) is None
    assert len(github.comments) == 1 and Notification.objects.filter(channel="ticket").count() == 1


def test_the_pull_requests_link_is_posted_when_the_requirement_is_deployed(
        acme_project, settings, tmp_path, github, rita):
    origin = repository_project(acme_project, tmp_path, settings, host_kind="github", token_env="GITHUB_TOKEN",
                                settings={"github": {"repository": "acme/shop", "api_url": github.url}})
    req = repository_requirement(acme_project, origin)
    commit_change(req, SMALL_CHANGE)
    ask_for_deployment(req)
    decide(pending(req, "deployment_approval"), rita, "approve")

    [comment] = github.comments
    assert comment["issue"] == 12
    assert "The draft pull request [#1](https://github.example/acme/shop/pull/1) is open for review." in comment["body"]


def test_a_triaged_question_gets_its_answer_and_no_second_comment_when_the_run_ends(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url))
    with transaction.atomic():
        emit(req, "TicketAnswered", {"source": "github", "key": "#12", "url": "", "text": "Use `total(prices)`. @all"})
        requirement_cancel(Requirement.objects.select_for_update().get(pk=req.pk), actor=Actor.agent("product_owner"),
                           reason="answered")
    [comment] = github.comments
    assert "read this ticket as a question" in comment["body"]
    assert "```text\nUse `total(prices)`. @all\n```" in comment["body"]  # literal: no mention, no code span escape


def test_an_out_of_scope_ticket_is_told_why(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url))
    emitted(req, "TicketRefused", {"reason": "This asks for a new product, not a change to this one."})
    [comment] = github.comments
    assert "will not work on this ticket" in comment["body"] and "not a change to this one." in comment["body"]


def test_the_real_reason_is_posted_when_a_person_cancels_or_a_step_fails_to_a_human(acme_project, github, rita):
    req = ticket_requirement(on_github(acme_project, github.url))
    with transaction.atomic():
        review_open(Requirement.objects.select_for_update().get(pk=req.pk), kind="step_failed",
                    question="Step 'repo_prepare' (attempt 1) failed after 3 run(s). Approve to run it again.",
                    reasoning="pip install failed: no matching distribution for shoplib==9.9", context={})
    with transaction.atomic():
        requirement_cancel(Requirement.objects.select_for_update().get(pk=req.pk), actor=Actor.human(rita, "api"),
                           reason="the dependency is private; we will vendor it first")
    failed, cancelled = (c["body"] for c in github.comments)
    assert "stopped working on this ticket" in failed and "a step failed. Step 'repo_prepare'" in failed
    assert "no matching distribution for shoplib==9.9" in failed
    assert "the requirement was cancelled: the dependency is private; we will vendor it first" in cancelled
    assert Notification.objects.filter(channel="ticket", state="sent").count() == 2


def test_a_review_that_needs_no_stop_posts_nothing(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url))
    with transaction.atomic():
        review_open(Requirement.objects.select_for_update().get(pk=req.pk), kind="deployment_approval",
                    question="Approve?", context={})
    assert github.comments == [] and not Notification.objects.filter(channel="ticket").exists()


def test_a_host_that_does_not_answer_is_retried_and_the_comment_lands_once(acme_project, github):
    project = on_github(acme_project, "http://127.0.0.1:9")  # nothing listens there
    req = ticket_requirement(project)
    emitted(req, "RepositoryPrepared", PREPARED)
    row = Notification.objects.get(channel="ticket")
    assert (row.state, row.attempts) == ("pending", 1) and "ConnectError" in row.last_error
    on_github(acme_project, github.url)  # the host is back (here: reachable at its address)

    later = timezone.now() + timedelta(hours=1)
    assert notification_send(row.pk, now=later) is None
    assert notification_send(row.pk, now=later) is None  # sent already: claimed by nobody
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("sent", 2) and len(github.comments) == 1


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_host_is_asked_again_after_its_retry_after_when_that_is_longer_than_the_backoff(
        status, acme_project, github, settings):
    settings.AITEAM_NOTIFY_BACKOFF_S = 30
    req = ticket_requirement(on_github(acme_project, github.url))
    github.busy_next(status, retry_after="600")
    before = timezone.now()
    emitted(req, "RepositoryPrepared", PREPARED)
    row = Notification.objects.get(channel="ticket")
    assert (row.state, row.attempts) == ("pending", 1) and "retry after 600s" in row.last_error
    assert timedelta(seconds=600) <= row.next_attempt_at - before < timedelta(seconds=660)  # not the 30 s backoff

    notification_send(row.pk, now=before + timedelta(seconds=300))  # not due: nothing is sent
    assert github.comments == []
    notification_send(row.pk, now=row.next_attempt_at)
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("sent", 2) and len(github.comments) == 1


def test_a_retry_after_shorter_than_the_backoff_or_not_in_ascii_digits_keeps_the_backoff(acme_project, github,
                                                                                         settings):
    settings.AITEAM_NOTIFY_BACKOFF_S = 300
    project = on_github(acme_project, github.url)
    github.busy_next(429, retry_after="5")
    github.busy_next(503, retry_after="\u00b2")  # a digit to str.isdigit, not to HTTP
    before = timezone.now()
    for key in ("#12", "#13"):
        github.add_issue("acme/shop", int(key[1:]))
        emitted(ticket_requirement(project, key=key), "RepositoryPrepared", PREPARED)
    for row in Notification.objects.filter(channel="ticket"):
        assert row.state == "pending" and github.comments == []
        assert timedelta(seconds=300) <= row.next_attempt_at - before < timedelta(seconds=360), row.last_error


def test_a_refused_token_fails_the_comment_for_good_without_repeating_it(acme_project, github, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "ghp_wrongTOKEN0123456789abcdef"
    monkeypatch.setenv("GITHUB_TOKEN", wrong)
    req = ticket_requirement(on_github(acme_project, github.url))
    emitted(req, "RepositoryPrepared", PREPARED)
    row = Notification.objects.get(channel="ticket")
    assert row.state == "failed" and "401" in row.last_error and "token was refused" in row.last_error
    assert github.comments == [] and wrong not in row.last_error and wrong not in caplog.text
    dump = io.StringIO()
    call_command("dumpdata", "lifecycle", stdout=dump)
    assert wrong not in dump.getvalue() and TOKEN not in dump.getvalue()


def test_a_ticket_of_another_repository_is_not_commented_on_here(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url), url="https://github.com/other/repo/issues/12")
    emitted(req, "RepositoryPrepared", PREPARED)
    row = Notification.objects.get(channel="ticket")
    assert row.state == "failed" and "an issue of another repository than acme/shop" in row.last_error
    assert github.comments == []


def test_gitlab_gets_an_issue_note_and_jira_a_comment(acme_project, settings, monkeypatch):
    monkeypatch.setenv("GITLAB_TOKEN", TOKEN)
    monkeypatch.setenv("JIRA_TOKEN", TOKEN)
    settings.AITEAM_TOKEN_ENVS = ["GITHUB_TOKEN", "GITLAB_TOKEN", "JIRA_TOKEN"]
    with FakeGitLabServer(TOKEN) as gitlab, FakeJiraServer(EMAIL, TOKEN) as jira:
        gitlab.add_project("acme/shop", issues=(12,))
        jira.add_issue("PROJ-7")
        settings.AITEAM_GITLAB_URLS, settings.AITEAM_JIRA_URLS = [gitlab.url], [jira.url]
        Project.objects.filter(pk=acme_project.pk).update(host_kind="gitlab", token_env="GITLAB_TOKEN", settings={
            "gitlab": {"project": "acme/shop", "url": gitlab.url},
            "jira": {"site_url": jira.url, "email": EMAIL, "token_env": "JIRA_TOKEN"}})
        project = Project.objects.get(pk=acme_project.pk)
        emitted(ticket_requirement(project, "gitlab", "#12"), "RepositoryPrepared", PREPARED)
        emitted(ticket_requirement(project, "jira", "PROJ-7"), "RepositoryPrepared", PREPARED)

        [note] = gitlab.notes
        assert note["noteable_iid"] == 12 and "started work on this ticket" in note["body"]
        [comment] = jira.comments
        assert "started work on this ticket" in plain_text(comment["body"])
    assert set(Notification.objects.filter(channel="ticket").values_list("state", flat=True)) == {"sent"}


def test_a_gitlab_project_named_by_its_id_gets_notes_on_its_own_issues(acme_project, settings, monkeypatch):
    monkeypatch.setenv("GITLAB_TOKEN", TOKEN)
    with FakeGitLabServer(TOKEN) as gitlab:
        number = gitlab.add_project("acme/shop", issues=(12,))
        settings.AITEAM_GITLAB_URLS = [gitlab.url]
        Project.objects.filter(pk=acme_project.pk).update(host_kind="gitlab", token_env="GITLAB_TOKEN", settings={
            "gitlab": {"project": str(number), "url": gitlab.url}})
        project = Project.objects.get(pk=acme_project.pk)
        req = ticket_requirement(project, "gitlab", "#12", url="https://gitlab.example/acme/shop/-/issues/12")
        Requirement.objects.filter(pk=req.pk).update(ticket_repository_id=str(number))  # as its webhook said
        emitted(req, "RepositoryPrepared", PREPARED)
        [note] = gitlab.notes
        assert note["noteable_iid"] == 12 and note["project_id"] == number
    assert Notification.objects.get(channel="ticket").state == "sent"


def test_a_brief_a_members_ticket_or_a_project_that_turned_comments_off_gets_none(acme_project, github):
    project = on_github(acme_project, github.url)
    emitted(ticket_requirement(project, source="", key=""), "RepositoryPrepared", PREPARED)
    emitted(ticket_requirement(project, key="#14", via_webhook=False), "RepositoryPrepared", PREPARED)  # ADR 42
    Project.objects.filter(pk=project.pk).update(settings={**project.settings, "ticket_comments": False})
    emitted(ticket_requirement(Project.objects.get(pk=project.pk), key="#13"), "RepositoryPrepared", PREPARED)
    assert github.comments == [] and not Notification.objects.filter(channel="ticket").exists()


def test_a_delivery_that_fails_to_a_person_says_why_on_the_ticket(acme_project, settings, tmp_path, github, rita):
    settings.AITEAM_STEP_MAX_RUNS = 1  # no retry left: the failed delivery goes to a person at once
    origin = repository_project(acme_project, tmp_path, settings, host_kind="github", token_env="GITHUB_TOKEN",
                                settings={"github": {"repository": "acme/shop", "api_url": github.url}})
    req = repository_requirement(acme_project, origin)
    commit_change(req, SMALL_CHANGE)
    ask_for_deployment(req)
    github.fail_next_create(500, "the pulls API is down")
    decide(pending(req, "deployment_approval"), rita, "approve")

    assert pending(req, "step_failed") and OutboxEvent.objects.filter(requirement=req, name="DeliveryFailed").exists()
    [comment] = github.comments
    assert "stopped working on this ticket" in comment["body"] and "a step failed. Step 'deliver'" in comment["body"]
    assert "delivery failed, compensated: GitHub POST /repos/acme/shop/pulls: 500 the pulls API is down" in comment["body"]


def test_the_reason_reaches_the_ticket_without_control_or_format_characters(acme_project, github):
    req = ticket_requirement(on_github(acme_project, github.url))
    with transaction.atomic():
        review_open(Requirement.objects.select_for_update().get(pk=req.pk), kind="escalation",
                    question="Three attempts\u200b failed.\x1b[2J\r\nsee \u202etxt.exe\x85done", context={},
                    reasoning="the model\u2028said so")
    [comment] = github.comments
    assert ("```text\nescalated to a person. Three attempts failed. [2J\nsee txt.exe\ndone\n\nthe model\nsaid so\n```"
            in comment["body"])
    assert not any(char in comment["body"] for char in ("\u202e", "\u200b", "\x1b", "\r", "\x85", "\u2028"))
    assert Notification.objects.get(channel="ticket").state == "sent"
