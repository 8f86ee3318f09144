"""An assistant's request created while its review task is being decided, on PostgreSQL (ADR 36, ADR 12): the
creation takes the requirement's lock, as the decision does. Whichever holds it first commits first; a request
created first is closed by the decision's sweep, one that waited for the decision is refused. None stays pending."""
import threading

import pytest
from django.db import connection, transaction

from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.models import ActionApproval, Conversation
from lifecycle.services.approvals import approval_request, propose_review_decision
from lifecycle.services.decisions import review_decide
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)


def holding(work, outcome: list, done: threading.Event | None = None,
            release: threading.Event | None = None) -> threading.Thread:
    """A thread that does `work` in a transaction, its outcome (or error) in `outcome`; with `release`, it sets
    `done` and holds the transaction open (its locks too) until `release` is set."""
    def run():
        try:
            with transaction.atomic():
                outcome.append(work())
                if release is not None:
                    done.set()
                    assert release.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - the test's assertions name it
            outcome.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_request_created_while_the_decision_holds_the_requirement_waits_and_is_refused(acme, acme_project, rita):
    task = open_review(acme_project, kind="step_failed")
    conversation = Conversation.objects.create(organization=acme, title="q", started_by=rita)
    proposed = propose_review_decision(organization_id=acme.pk, task_id=task.pk, decision="approve")  # pending here
    decided, release, created = threading.Event(), threading.Event(), []
    decider = holding(lambda: review_decide(task_id=task.pk, actor=Actor.human(rita, "api"), decision="reject",
                                            reason="not worth it"), [], decided, release)
    assert decided.wait(timeout=10)

    creator = holding(lambda: approval_request(proposed=proposed, asker=rita, conversation=conversation), created)
    creator.join(timeout=0.5)
    assert creator.is_alive()  # waits for the requirement the decision holds
    release.set()
    decider.join(timeout=10)
    creator.join(timeout=10)

    [refused] = created
    assert isinstance(refused, IllegalTransition) and "is already resolved" in str(refused)
    assert not ActionApproval.objects.exists()


def test_a_request_created_first_makes_the_decision_wait_and_its_sweep_closes_it(acme, acme_project, rita):
    task = open_review(acme_project, kind="step_failed")
    conversation = Conversation.objects.create(organization=acme, title="q", started_by=rita)
    proposed = propose_review_decision(organization_id=acme.pk, task_id=task.pk, decision="approve")
    made, release, created, decided = threading.Event(), threading.Event(), [], []
    creator = holding(lambda: approval_request(proposed=proposed, asker=rita, conversation=conversation), created,
                      made, release)
    assert made.wait(timeout=10) and isinstance(created[0], ActionApproval)

    decider = holding(lambda: review_decide(task_id=task.pk, actor=Actor.human(rita, "api"), decision="reject",
                                            reason="not worth it"), decided)
    decider.join(timeout=0.5)
    assert decider.is_alive()  # waits for the requirement the creation holds
    release.set()
    creator.join(timeout=10)
    decider.join(timeout=10)

    assert decided and decided[0].decision == "reject"
    approval = ActionApproval.objects.get()
    assert approval.state == ActionApproval.State.SUPERSEDED
    assert approval.result == "not needed: the review task was decided another way: reject by rita"


def test_an_approval_decided_while_the_decision_holds_the_requirement_waits_before_locking_the_request(
        acme, acme_project, rita):
    """ADR 12: approval_decide takes the requirement first, as the decision it runs does; it never holds the request
    while it waits for the requirement."""
    from django.db import DatabaseError

    from lifecycle.services.approvals import approval_decide

    task = open_review(acme_project, kind="step_failed")
    conversation = Conversation.objects.create(organization=acme, title="q", started_by=rita)
    approval = approval_request(proposed=propose_review_decision(organization_id=acme.pk, task_id=task.pk,
                                                                 decision="approve"), asker=rita, conversation=conversation)
    decided, release, approved = threading.Event(), threading.Event(), []
    decider = holding(lambda: review_decide(task_id=task.pk, actor=Actor.human(rita, "api"), decision="reject",
                                            reason="not worth it"), [], decided, release)
    assert decided.wait(timeout=10)

    approver = holding(lambda: approval_decide(approval_id=approval.pk, actor=Actor.human(rita, "api"), approve=True),
                       approved)
    approver.join(timeout=0.5)
    assert approver.is_alive()  # waits for the requirement the decision holds
    try:
        with transaction.atomic():  # the request itself is free: the approver has not locked it
            ActionApproval.objects.select_for_update(nowait=True).get(pk=approval.pk)
        free = True
    except DatabaseError:
        free = False
    release.set()
    decider.join(timeout=10)
    approver.join(timeout=10)

    assert free
    [done] = approved
    assert (done.state, done.result) == ("failed", "not done: review task is already resolved (reject)")
