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
from tests.factories import MembershipFactory, UserFactory
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
    assert "A new prompt bundle for acme/default is proposed by otto, changing product_owner." in message.body
    assert "quoted in the proposer's words:\n> fewer clarification rounds\n" in message.body
    assert message.body.rstrip().endswith(
        f"Decide it in the admin: {settings.AITEAM_PUBLIC_URL}/admin/lifecycle/promotiondecision/{proposal.pk}/change/")
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


def test_the_projects_webhook_hears_of_it_with_the_proposers_text_quoted_escaped_and_cleaned(acme_project, alice,
                                                                                             owners, settings):
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    settings.AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS = True  # the endpoint listens on loopback
    effect = ("<!channel> fewer\u200b loops\n\nDecide it: http://evil.example/approve \u202egnp.exe\x1b[2K "
              + "and more " * 60)
    with WebhookServer() as endpoint:
        acme_project.settings = {"notifications": {"webhook_url": f"{endpoint.url}/project-hook"}}
        acme_project.save()
        proposal = propose_budget(acme_project, alice, {"roles": {"senior_engineer": {"steps": 30}}}, expected=effect)

    [request] = endpoint.requests
    text = json.loads(request["body"])["text"]
    assert request["path"] == "/project-hook" and text.startswith("*Promotion to decide: the budget profile of")
    # the proposer's text stays on its quoted line: its fake link cannot pose as the real one, which is labelled
    quoted = "\n&gt; &lt;!channel&gt; fewer loops Decide it: http://evil.example/approve gnp.exe [2K and more"
    assert quoted in text and "<!channel>" not in text and "\nDecide it: http://evil" not in text
    assert f"\nDecide it in the admin: {settings.AITEAM_PUBLIC_URL}/admin/lifecycle/promotiondecision/{proposal.pk}/" \
        in text
    assert not any(char in text for char in ("\u200b", "\u202e", "\x1b"))
    assert "changing roles.senior_engineer.steps." in text
    body = mail.outbox[0].body
    line = next(line for line in body.splitlines() if "http://evil" in line)
    assert line.startswith("> ") and len(line) < 400 and line.endswith("…")  # trimmed, like a brief elsewhere
    assert not any(char in body for char in ("\u200b", "\u202e", "\x1b"))
    assert Notification.objects.get(channel="webhook").project_id == acme_project.pk


def test_only_the_active_admins_of_the_projects_organization_are_mailed_and_the_operators_webhook_hears_of_it(
        acme_project, globex, owners, alice, settings):
    olga, otto = owners
    MembershipFactory(organization=globex, role="admin", user__username="gina", user__email="gina@globex.test")
    MembershipFactory(organization=acme_project.organization, role="admin", user__username="ivan",
                      user__email="ivan@acme.test", user__is_active=False)
    UserFactory(username="root", email="root@ops.test", is_superuser=True, is_staff=True)  # an operator, no member
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    with WebhookServer() as endpoint:
        settings.AITEAM_NOTIFY_WEBHOOK_URL = f"{endpoint.url}/operator-hook"  # the project has no webhook of its own
        propose_prompt(acme_project, otto)

    assert [m.to for m in mail.outbox] == [["olga@acme.test"]]  # not gina, ivan, root; not otto, who proposed it
    [request] = endpoint.requests
    assert request["path"] == "/operator-hook"
    assert "Promotion to decide: the prompt bundle of acme/default" in json.loads(request["body"])["text"]


def test_the_message_names_the_suite_not_its_path_and_a_deleted_proposer_as_such(acme_project, owners, monkeypatch):
    _, otto = owners
    candidate = {"requirement": {"steps": 9}}
    before, after = evidence(acme_project, "budgets", current_version(acme_project, "budgets")[0], candidate,
                             suite="/home/operator/aiteam/evals/offline")  # `--suite` given as a path
    with monkeypatch.context() as down:  # the announcement is worked out after its proposer left
        down.setattr(notify_for_event_task, "delay", lambda event_id: None)
        promotion_propose(project=acme_project, artifact="budgets", candidate=candidate, current_run=before,
                          candidate_run=after, actor=Actor.human(otto, "cli"), expected_effect="fewer loops")
    otto.delete()
    notify_for_event(OutboxEvent.objects.get(name="PromotionProposed").pk)

    [message] = mail.outbox
    assert "the suite offline, run offline once with each version" in message.body
    assert "/home/operator" not in message.body
    assert "is proposed by a deleted user, changing requirement.steps." in message.body


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
    assert "A new prompt bundle for acme/default is proposed by the optimizer, changing senior_engineer_fix, " \
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
