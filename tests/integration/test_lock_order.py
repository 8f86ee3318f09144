"""Whatever locks a step and its requirement together locks the requirement first, as review decisions do (they
lock the requirement, then a failed or parked step to run it again, or the steps still in flight). An apply
whose lease went stale meanwhile, or a step failing or giving up, used to lock the step first and then wait for
the requirement while the decision waited for the step: PostgreSQL killed one of the two."""
import threading

import pytest
from django.conf import settings
from django.db import connection, connections, transaction

from lifecycle.errors import StaleStep
from lifecycle.models import ReviewTask, Step
from lifecycle.services import leases
from tests.integration.test_step_claim import queued_first_step

pytestmark = pytest.mark.django_db(transaction=True)


def lock_for_apply(step):
    lease = leases.step_claim(step_id=step.pk, worker="slow")  # locks the step only, and commits
    with transaction.atomic():
        leases.lock_for_apply(lease)


def step_fail(step):
    leases.step_fail(leases.step_claim(step_id=step.pk, worker="slow"), error="boom")


def failure_routed(step):
    """The path every step that raises takes (lifecycle.runner): classified, then failed or released."""
    from lifecycle.services.routing import step_failure_route

    lease = leases.step_claim(step_id=step.pk, worker="slow")
    step_failure_route(lease=lease, exc=RuntimeError("boom"), error="boom", resend=False)


def give_up(step):
    Step.objects.filter(pk=step.pk).update(runs=settings.AITEAM_STEP_MAX_RUNS)
    return leases.step_claim(step_id=step.pk, worker="late")


@pytest.mark.parametrize("action,outcome", [
    (lock_for_apply, StaleStep), (step_fail, StaleStep), (failure_routed, StaleStep),
    (give_up, None),
], ids=["lock_for_apply", "step_fail", "step_failure_route", "give_up"])
def test_a_step_waiting_for_its_requirement_holds_no_step_and_a_decision_takes_the_step_at_once(
        broker_url, alice, action, outcome):
    step = queued_first_step(broker_url, alice)
    result = []

    def act():
        try:
            result.append(action(step))
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            result.append(exc)
        finally:
            connection.close()

    decider = connections.create_connection("default")  # a second session, in a review decision's place
    try:
        with decider.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE", [step.requirement_id])
            actor = threading.Thread(target=act)
            actor.start()
            actor.join(timeout=1.0)
            assert actor.is_alive()  # waiting for the requirement
            cursor.execute("SET LOCAL lock_timeout = '5s'")
            cursor.execute("SELECT 1 FROM lifecycle_step WHERE id = %s FOR UPDATE", [step.pk])  # not held
            cursor.execute("UPDATE lifecycle_step SET fence = fence + 1 WHERE id = %s", [step.pk])
            cursor.execute("COMMIT")
        actor.join(timeout=10)
    finally:
        decider.close()
    assert len(result) == 1, result
    if outcome is None:  # the give-up went ahead once the decision committed
        assert result == [None] and Step.objects.get(pk=step.pk).state == "failed"
        assert ReviewTask.objects.filter(requirement_id=step.requirement_id, kind="step_failed").count() == 1
    else:
        assert isinstance(result[0], outcome), result
