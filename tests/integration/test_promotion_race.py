"""Two owners deciding a project's promotions at the same moment on PostgreSQL (ADR 39): every decision locks the
project first, so they wait for each other; none deadlocks, and what is current is what the last winner adopted.
Two proposals of one candidate at the same moment: the project's lock lets one through, the other is 409."""
import threading

import pytest
from django.db import connection

from agents.prompts import prompt_files
from lifecycle.evals.running import evaluator
from lifecycle.models import Membership, Project, PromotionDecision
from lifecycle.services.promotions import bundle_with, current_version
from tests.conftest import api_for
from tests.factories import MembershipFactory
from tests.unit.test_promotions import evidence, propose_prompt

pytestmark = pytest.mark.django_db(transaction=True)
RACES = 10


def race(calls) -> list[int]:
    barrier, statuses = threading.Barrier(len(calls)), []

    def post(client, url, body):
        barrier.wait()
        try:
            statuses.append(client.post(url, body, format="json").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return sorted(statuses)


def test_accepting_one_proposal_while_another_is_rejected_or_rolled_back_never_deadlocks(acme_project, alice):
    olga, otto = (MembershipFactory(organization=acme_project.organization, role="admin", user__username=name).user
                  for name in ("olga", "otto"))
    clients = {user: api_for(user) for user in (olga, otto)}
    for n in range(RACES):
        project = Project.objects.get(pk=acme_project.pk)  # as the last round left it
        first, second = propose_prompt(project, alice, f"\nIDEA {n}a"), propose_prompt(project, alice, f"\nIDEA {n}b")
        statuses = race([(clients[olga], f"/api/v1/promotions/{first.pk}/accept/", {"reason": "a"}),
                         (clients[otto], f"/api/v1/promotions/{second.pk}/reject/", {"reason": "b"})])
        assert statuses in ([200, 200], [200, 409])  # the reject loses only to the supersede
        assert current_version(Project.objects.get(pk=acme_project.pk), "prompts")[0] == first.candidate_version

        third = propose_prompt(Project.objects.get(pk=acme_project.pk), alice, f"\nIDEA {n}c")
        statuses = race([(clients[olga], f"/api/v1/promotions/{third.pk}/accept/", {"reason": "c"}),
                         (clients[otto], f"/api/v1/promotions/{first.pk}/rollback/", {"reason": "undo"})])
        assert 500 not in statuses and statuses.count(409) <= 1
        latest = PromotionDecision.objects.exclude(adopted=None).order_by("-decided_at").first()
        assert current_version(Project.objects.get(pk=acme_project.pk), "prompts")[0] == latest.adopted_version


def test_of_two_identical_proposals_at_the_same_moment_one_is_recorded_and_the_other_refused(acme_project, alice, sam):
    for user in (alice, sam):
        Membership.objects.create(user=user, organization=evaluator()[1], role="reviewer")  # reads the eval runs
    clients = [api_for(alice), api_for(sam)]
    for n in range(RACES):
        changed = {"qc_engineer": f"{prompt_files()['qc_engineer']}\nIDEA {n}"}
        before, after = evidence(acme_project, "prompts", current_version(acme_project, "prompts")[0],
                                 bundle_with(acme_project, changed).pk)
        body = {"project": str(acme_project.pk), "artifact": "prompts", "candidate": changed,
                "current_run": before.pk, "candidate_run": after.pk, "expected_effect": f"idea {n}"}
        statuses = race([(client, "/api/v1/promotions/", body) for client in clients])
        assert statuses == [201, 409]
    assert PromotionDecision.objects.filter(state="proposed").count() == RACES
