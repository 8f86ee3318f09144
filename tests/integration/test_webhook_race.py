"""The same webhook delivery posted twice at once, and two deliveries of one issue at once, on PostgreSQL: one
requirement each time. The second INSERT waits on a unique index (the delivery id's, or the live ticket's) for the
first transaction, then fails and reads what it made; nothing is checked-then-written."""
import threading
from functools import partial

import pytest
from django.db import connection

from lifecycle.models import Requirement, StateTransition, Step, WebhookDelivery
from tests.webhook_payloads import github_comment, github_issue, to_github

pytestmark = pytest.mark.django_db(transaction=True)
SECRET, RACES = "race-hook-secret-5e6f", 8


@pytest.fixture
def hooked(acme_project, settings, monkeypatch):
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["ACME_GITHUB_HOOK"]
    monkeypatch.setenv("ACME_GITHUB_HOOK", SECRET)
    acme_project.github_webhook_secret_env = "ACME_GITHUB_HOOK"
    acme_project.save()
    return acme_project


def together(*posts) -> list:
    barrier, answers = threading.Barrier(len(posts)), []

    def run(post):
        barrier.wait()
        try:
            response = post()
            answers.append((response.status_code, response.json()["detail"], response.json()["requirement"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(post,)) for post in posts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_one_delivery_posted_twice_at_once_makes_one_requirement(hooked):
    for race in range(RACES):
        send = partial(to_github, hooked, github_issue(number=100 + race), secret=SECRET, delivery=f"race-{race}")
        answers = together(send, send)
        assert sorted((status, detail) for status, detail, _ in answers) == [(202, "created"), (202, "repeat")], answers
        requirement = Requirement.objects.get(ticket_key=f"#{100 + race}")
        assert StateTransition.objects.filter(requirement=requirement).count() == 1
        assert Step.objects.filter(requirement=requirement).count() == 1
    assert Requirement.objects.count() == WebhookDelivery.objects.count() == RACES


def test_a_label_and_a_command_for_one_issue_at_once_make_one_requirement(hooked):
    for race in range(RACES):
        number = 200 + race
        label = partial(to_github, hooked, github_issue(number=number), secret=SECRET)
        command = partial(to_github, hooked, github_comment(number=number), secret=SECRET, event="issue_comment")
        answers = together(label, command)
        assert sorted(detail for _, detail, _ in answers) == ["created", "live"], answers
        assert len({pk for _, _, pk in answers}) == 1, answers
        assert Requirement.objects.filter(ticket_key=f"#{number}").count() == 1
    assert Requirement.objects.count() == RACES and WebhookDelivery.objects.count() == 2 * RACES
