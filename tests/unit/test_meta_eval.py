"""The meta-evaluation log is written as runs happen (docs/meta-eval.md): a routed fix judged by what came next (a
misroute when the same failure comes back), a gate contradicted by a person or a later gate, a requirement's loops
and budget use once at its end; and it is append-only."""
import json

import pytest
from django.db import IntegrityError
from django.test import Client

from lifecycle.actors import Actor
from lifecycle.models import AppendOnlyError, FailureRoute, MetaEvalLog, OutboxEvent, Requirement
from lifecycle.services.decisions import review_decide
from lifecycle.services.meta_eval import failure_route_judged, meta_log
from lifecycle.services.meta_eval_end import requirement_ended
from lifecycle.services.outbox import relay
from tests.answers import answer
from tests.conftest import staff_client
from tests.flows import decide, fresh, pending, submit
from tests.unit.test_failure_routing import approved, queue

pytestmark = pytest.mark.django_db(transaction=True)
SPEC, DESIGN_OK, PLAN = answer("tech_architect"), answer("tech_lead", 0), answer("tech_lead", 1)
T1, T2_BUGGY, T3, FIX = (answer("senior_engineer", i) for i in range(4))
T2_OK = {"reasoning": "store with the ISBN check", "files": FIX["files"] + T2_BUGGY["files"][1:]}
CODE_OK, QC, DEVOPS = answer("tech_lead", 2), answer("qc_engineer"), answer("devops_engineer")
TO_PLAN = (answer("product_owner"), answer("business_analyst"), SPEC, DESIGN_OK, PLAN)
CHANGES = {"verdict": "request_changes", "reasoning": "naming", "notes": ["store.py: name the temp file clearly"]}


@pytest.fixture
def remotes(settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"


def entries(req, kind: str) -> list[MetaEvalLog]:
    return list(MetaEvalLog.objects.filter(requirement=req, kind=kind).order_by("id"))


def test_a_fix_that_brings_the_same_failure_back_is_logged_as_a_misroute(alice, rita, scripted, remotes):
    queue(scripted, *TO_PLAN, T1, T2_BUGGY, T3, {"reasoning": "retry", "files": T2_BUGGY["files"][:1]})
    req = approved(alice, rita)
    assert req.state == "escalated"  # the same failing test after the engineer's fix
    (misroute,) = entries(req, "route")
    first = req.failure_routes.first()
    assert (misroute.role, misroute.playbook, misroute.organization_id, misroute.project_id) == (
        "senior_engineer", "new_feature", req.organization_id, req.project_id)
    assert misroute.data == {"failure_route": first.pk, "source": "self_test", "failure_kind": "self_test:failing_tests",
                             "routed_to": "engineer", "recurred": True, "signature": first.signature,
                             "judged_by": "next failure (repeated_after_fix)"}
    queue(scripted, FIX, CODE_OK, QC, DEVOPS)
    decide(pending(req, "escalation"), rita, "request_changes", feedback="Store.add must check the ISBN first")
    decide(pending(fresh(req), "deployment_approval"), rita, "approve")
    assert fresh(req).state == "deployed"
    held = entries(req, "route")[1]  # the human's guidance held: the failure did not come back
    assert (held.role, held.data["routed_to"], held.data["recurred"], held.data["judged_by"]) == (
        "human", "human", False, "deployed")
    assert held.data["failure_kind"] == "self_test:repeated_after_fix"


def test_a_requirement_that_deploys_logs_its_loops_budget_and_held_fixes_once(alice, rita, remotes):
    req = approved(alice, rita)  # the sample: one failing self-test, fixed at the second attempt
    decide(pending(req, "deployment_approval"), rita, "approve")
    req = fresh(req)
    assert req.state == "deployed"
    (loops,) = entries(req, "loops")
    assert loops.data == {**loops.data, "dev_attempts": 2, "engineer_fixes": 1, "code_review_rounds": 1,
                          "qc_rounds": 1, "state": "deployed"}
    budget = {entry.role: entry for entry in entries(req, "budget_use")}
    assert {"", "senior_engineer", "tech_lead", "sandbox"} <= set(budget)
    whole = budget[""].data
    assert whole["scope"] == "requirement" and whole["dimensions"]["steps"]["limit"] == 150
    steps = whole["dimensions"]["steps"]
    assert steps["spent"] > 0 and whole["use"] == max(c["use"] for c in whole["dimensions"].values() if c["use"])
    assert budget["senior_engineer"].data["dimensions"]["steps"]["limit"] == 80
    assert budget["sandbox"].data["use"] is None  # no allocation of its own: spend kept, no ratio
    (held,) = entries(req, "route")
    assert (held.data["routed_to"], held.data["recurred"], held.data["judged_by"]) == ("engineer", False, "deployed")

    deployed = OutboxEvent.objects.get(requirement=req, name="Deployed")
    written = MetaEvalLog.objects.filter(requirement=req).count()
    requirement_ended(deployed)  # the handler again: a retried event
    OutboxEvent.objects.filter(pk=deployed.pk).update(sent_at=None)
    assert relay(ids=[deployed.pk]) == 1  # and the whole event relayed again
    assert MetaEvalLog.objects.filter(requirement=req).count() == written


def test_a_cancelled_requirement_logs_its_loops_and_budget_but_judges_no_fix(alice, rita, scripted):
    queue(scripted, *TO_PLAN, T1, T2_BUGGY, T3, {"reasoning": "retry", "files": T2_BUGGY["files"][:1]})
    req = approved(alice, rita)
    decide(pending(req, "escalation"), rita, "reject", reason="not worth it")
    assert fresh(req).state == "cancelled"
    assert [e.data["state"] for e in entries(req, "loops")] == ["cancelled"]
    assert entries(req, "budget_use") and len(entries(req, "route")) == 1  # only the misroute, judged before


def test_a_person_approving_code_the_tech_lead_refused_is_an_overridden_gate(alice, rita, scripted, settings, remotes):
    settings.AITEAM_MAX_CODE_REVIEW_ROUNDS = 1
    queue(scripted, *TO_PLAN, T1, T2_OK, T3, CHANGES, QC, DEVOPS)
    req = approved(alice, rita)
    task = pending(req, "code_review")
    decide(task, rita, "approve")
    assert fresh(req).state == "ready_to_deploy"
    (override,) = entries(req, "gate_signal")
    assert override.data == {"gate": "code_review", "verdict": "fail", "contradicted_by": "human_override",
                             "review_task": str(task.pk), "round": 1, "decided_via": "api"}


def test_a_refused_deployment_contradicts_the_quality_gate_that_passed_it(alice, rita, remotes):
    req = approved(alice, rita)
    task = pending(req, "deployment_approval")
    decide(task, rita, "reject", reason="Add a --version flag first")
    (signal,) = entries(req, "gate_signal")
    assert signal.data == {"gate": "quality", "verdict": "pass", "contradicted_by": "later_gate",
                           "later_gate": "deployment_approval", "review_task": str(task.pk), "round": 1,
                           "decided_by": "human"}


def test_a_quality_gate_failing_what_code_review_passed_is_a_false_pass_of_code_review(alice, rita, settings, tmp_path):
    data = json.loads(settings.AITEAM_REPLAY_CASSETTE.read_text())
    for i in data["interactions"]:  # T3 prints another message for an empty list: an acceptance test fails in QC
        if i["role"] == "senior_engineer" and i["match"] == ['"key": "T3"']:
            for f in i["tool_input"]["files"]:
                f["content"] = f["content"].replace('"No books."', '"Nothing to read."')
    settings.AITEAM_REPLAY_CASSETTE = tmp_path / "variant.json"
    settings.AITEAM_REPLAY_CASSETTE.write_text(json.dumps(data))
    req = approved(alice, rita)
    (signal,) = entries(req, "gate_signal")
    assert signal.data == {"gate": "code_review", "verdict": "pass", "contradicted_by": "later_gate",
                           "later_gate": "quality", "rule": "failing_tests", "round": 1}


def test_the_log_refuses_changes_and_deletions(acme, acme_project, rita):
    entry = meta_log("promotion", organization=acme, project=acme_project, data={"decision": "accepted",
                                                                                  "artifact": "prompt:qc_engineer"})
    entry.data = {"decision": "rejected"}
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        entry.delete()
    with pytest.raises(AppendOnlyError):
        MetaEvalLog.objects.filter(pk=entry.pk).update(role="x")
    with pytest.raises(AppendOnlyError):
        MetaEvalLog.objects.all().delete()
    assert MetaEvalLog.objects.get().data == {"decision": "accepted", "artifact": "prompt:qc_engineer"}
    client = staff_client(rita)
    base = "/admin/lifecycle/metaevallog/"
    assert client.get(base).status_code == 200 and client.get(f"{base}{entry.pk}/change/").status_code == 200
    assert client.post(f"{base}{entry.pk}/change/", {"role": "x"}).status_code == 403
    assert client.get(f"{base}add/").status_code == 403 and client.get(f"{base}{entry.pk}/delete/").status_code == 403
    assert Client().get(base).status_code == 302


def test_a_keyed_entry_is_written_once(acme):
    first = meta_log("promotion", organization=acme, data={"decision": "accepted"}, key="promotion:7")
    again = meta_log("promotion", organization=acme, data={"decision": "accepted"}, key="promotion:7")
    assert first is not None and again is None and MetaEvalLog.objects.count() == 1


def test_an_organizations_deletion_takes_its_entries_and_a_requirements_leaves_them(acme, globex, alice):
    req = submit(alice)
    meta_log("loops", organization=acme, requirement=req, data={"dev_attempts": 1})
    meta_log("promotion", organization=globex, data={"decision": "rejected"})
    req.delete()
    assert MetaEvalLog.objects.get(organization=acme).requirement is None
    globex.delete()
    assert MetaEvalLog.objects.count() == 1


# --- from a review: what the log must not count -------------------------------------------------
def test_a_replays_routes_and_decisions_are_not_entries(alice, acme_project):
    from lifecycle.services.meta_eval import append, entry_for

    source = submit(alice)
    replay = Requirement.objects.create(organization=source.organization, project=source.project, brief="b",
                                        replay_of=source)
    written = append([entry_for(replay, "route", data={"recurred": True}), entry_for(source, "loops", data={})])
    assert [entry.requirement_id for entry in written] == [source.pk]
    assert not MetaEvalLog.objects.filter(requirement=replay).exists()


def test_a_policys_refusal_of_a_deployment_contradicts_no_gate(alice, rita, remotes):
    req = approved(alice, rita)
    task = pending(req, "deployment_approval")
    review_decide(task_id=task.pk, actor=Actor.policy("sla_policy"), decision="reject", reason="timed out")
    assert entries(req, "gate_signal") == []


def test_a_review_asking_for_changes_again_after_a_fix_is_the_same_failure_back(alice, acme_project):
    req = submit(alice)
    first, second = (FailureRoute.objects.create(organization=req.organization, requirement=req, source="code_review",
                                                 route="engineer", rule="review_changes", summary="s", action="a")
                     for _ in range(2))
    failure_route_judged(second)
    (entry,) = entries(req, "route")
    assert entry.data["failure_route"] == first.pk and entry.data["recurred"] is True  # no signature: the type


def test_an_entry_carrying_an_existing_id_does_not_overwrite_it(acme):
    entry = meta_log("loops", organization=acme, data={"n": 1})
    with pytest.raises(IntegrityError):
        MetaEvalLog(pk=entry.pk, kind="loops", organization=acme, data={"n": 2}).save()
    assert MetaEvalLog.objects.get(pk=entry.pk).data == {"n": 1}
