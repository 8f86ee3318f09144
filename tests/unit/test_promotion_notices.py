"""A new promotion proposal is announced to the project's owners (ADR 39): by e-mail (locmem) to its organization's
admins but the proposer, and to the project's webhook (a local endpoint), once per event, like a review task."""
import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.evals.optimizer import draft_constraint
from lifecycle.models import Notification, OutboxEvent
from lifecycle.notifications.handlers import events_requeue_unnotified, notify_for_event
from lifecycle.services import outbox
from lifecycle.services.promotions import current_version, promotion_decide, promotion_propose
from lifecycle.tasks import notify_for_event as notify_for_event_task
from tests.factories import MembershipFactory
from tests.fakes.webhook_server import WebhookServer
from tests.unit.test_promotions import evidence, misroutes, propose_budget, propose_prompt

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owners(acme):
    """Two admins of the project's organization, with addresses."""
    return [MembershipFactory(organization=acme, role="admin", user__username=name,
                              user__email=f"{name}@acme.test").user for name in ("olga", "otto")]


@pytest.fixture
def rita_with_mail(rita):
    rita.email = "rita@acme.test"
    rita.save()
    return rita


def test_a_proposal_is_mailed_once_to_the_owners_but_its_proposer_with_its_link(acme_project, owners, rita_with_mail,
                                                                              settings):
    olga, otto = owners
    proposal = propose_prompt(acme_project, otto)

    [message] = mail.outbox  # otto proposed it; rita reviews requirements, she does not own the project's prompts
    assert message.to == ["olga@acme.test"]
    assert message.subject == "Promotion to decide: the prompt bundle of acme/default"
    assert f"{settings.AITEAM_PUBLIC_URL}/admin/lifecycle/promotiondecision/{proposal.pk}/change/" in message.body
    assert "otto proposes a new prompt bundle for acme/default, changing product_owner." in message.body
    assert "in the proposer's words: fewer clarification rounds" in message.body
    assert f"current (run #{proposal.current_run_id}): 1 case (escalated 1)" in message.body
    assert (f"candidate (run #{proposal.candidate_run_id}): 1 case (deployed 1); hidden tests passed in full: 1; "
            "cost $0.2500") in message.body
    assert "CONSTRAINT FROM A PROMOTION" not in message.body  # the diff stays on the page

    event = OutboxEvent.objects.get(name="PromotionProposed")
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)
    outbox.relay(ids=[event.pk])  # relayed again
    notify_for_event(event.pk)  # worked out again
    assert len(mail.outbox) == 1 and Notification.objects.get().event == "promotion_proposed"
    assert events_requeue_unnotified(now=timezone.now() + timedelta(minutes=5)) == 0  # notified: the beat leaves it


def test_the_projects_webhook_hears_of_it_with_the_proposers_text_escaped_on_one_line(acme_project, alice, owners,
                                                                                      settings):
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    settings.AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS = True  # the endpoint listens on loopback
    effect = "<!channel> fewer loops\n\nDecide it: http://evil.example/approve " + "and more " * 60
    with WebhookServer() as endpoint:
        acme_project.settings = {"notifications": {"webhook_url": f"{endpoint.url}/project-hook"}}
        acme_project.save()
        propose_budget(acme_project, alice, {"roles": {"senior_engineer": {"steps": 30}}}, expected=effect)

    [request] = endpoint.requests
    text = json.loads(request["body"])["text"]
    assert request["path"] == "/project-hook" and text.startswith("*Promotion to decide: the budget profile of")
    assert "&lt;!channel&gt; fewer loops Decide it: http://evil.example/approve and more" in text
    assert "<!channel>" not in text and "\nDecide it: http://evil" not in text
    assert "changing roles.senior_engineer.steps." in text
    body = mail.outbox[0].body
    line = next(line for line in body.splitlines() if "in the proposer's words" in line)
    assert len(line) < 400 and line.endswith("…")  # trimmed, like a brief in a review task's message
    assert Notification.objects.get(channel="webhook").project_id == acme_project.pk


def test_a_lost_announcement_goes_out_at_the_beat_unless_the_proposal_was_decided_meanwhile(
        acme_project, alice, owners, monkeypatch):
    olga, _ = owners
    with monkeypatch.context() as down:
        down.setattr(notify_for_event_task, "delay",
                     lambda event_id: (_ for _ in ()).throw(ConnectionError("broker down")))
        waiting = propose_prompt(acme_project, alice)
        decided = propose_budget(acme_project, alice, {"requirement": {"steps": 9}})
    promotion_decide(decision_id=decided.pk, actor=Actor.human(olga, "api"), decision="reject", reason="too few")
    assert not mail.outbox

    assert events_requeue_unnotified(now=timezone.now() + timedelta(minutes=5)) == 2
    assert [m.subject for m in mail.outbox] == ["Promotion to decide: the prompt bundle of acme/default"] * 2
    assert {m.to[0] for m in mail.outbox} == {"olga@acme.test", "otto@acme.test"}
    assert str(waiting.pk) in mail.outbox[0].body
    assert not OutboxEvent.objects.filter(name="PromotionProposed", notified_at=None).exists()


def test_the_optimizers_proposal_is_announced_as_its_own(acme_project, owners):
    misroutes(acme_project, 2)
    draft = draft_constraint(acme_project)
    before, after = evidence(acme_project, "prompts", current_version(acme_project, "prompts")[0], draft.bundle)
    promotion_propose(project=acme_project, artifact="prompts", candidate=draft.bundle, current_run=before,
                      candidate_run=after, actor=Actor.system("optimizer"), expected_effect=draft.expected)

    assert len(mail.outbox) == 2
    assert "The optimizer proposes a new prompt bundle for acme/default, changing senior_engineer_fix, " \
           "senior_engineer_fix_edits." in mail.outbox[0].body


def test_migration_0034_marks_the_proposals_relayed_before_it_as_notified(db):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("lifecycle.migrations.0034_promotion_announcements")
    relayed = timezone.now() - timedelta(hours=2)
    proposed = OutboxEvent.objects.create(name="PromotionProposed", payload={}, sent_at=relayed)
    opened = OutboxEvent.objects.create(name="ReviewTaskOpened", payload={}, sent_at=relayed)
    migration.mark_relayed_proposals_as_notified(apps, None)
    marked = dict(OutboxEvent.objects.values_list("pk", "notified_at"))
    assert (marked[proposed.pk], marked[opened.pk]) == (relayed, None)
