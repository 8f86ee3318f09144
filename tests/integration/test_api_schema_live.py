"""The OpenAPI schema against a live server on PostgreSQL: schemathesis with every check finds no server error
and no answer the schema does not describe, and each error status the schema documents is one the server gives.

A seeded organization gives the operations data: a requirement waiting on a review task, routed failures, model
calls with a cost, a decided task. Examples are bounded per operation and derandomized: the same cases each run."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

import pytest
import requests
import schemathesis
from django.conf import settings as settings_module
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings

from agents.prompts import prompt_files
from lifecycle.actors import Actor
from lifecycle.evals.running import evaluator
from lifecycle.models import ConversationParticipant, FailureRoute, LLMCall, Membership, Step
from lifecycle.services.approvals import approval_decide, approval_request, propose_review_decision
from lifecycle.services.conversations import conversation_start
from lifecycle.services.promotions import promotion_decide
from tests.conftest import api_for
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.flows import decide
from tests.review_tasks import open_review
from tests.unit.test_promotions import propose_prompt

pytestmark = pytest.mark.django_db(transaction=True)
CONFIG = schemathesis.Config.from_dict({
    "generation": {"max-examples": 15, "deterministic": True},
    # valid by the schema yet refused by rules it cannot state: a project of another organization, a decision that is
    # not an option of this task (400), an object drawn at random (404), a task already decided (409)
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2XX", "400", "404", "409"]}},
})


@dataclass
class World:
    url: str
    ids: dict[str, str]  # the collection in the path → the id of one of its seeded objects
    tokens: dict[str, str]  # persona → Authorization header
    decided_task: str
    decided_approval: str
    decided_promotion: str
    proposed_again: dict  # the body of the open proposal's POST, sent again by its proposer (sam): 409
    session: str  # a signed-in browser's session cookie (a write without its CSRF token is 403)

    def headers(self, persona: str = "ada") -> dict[str, str]:
        return {"Authorization": self.tokens[persona]}


def authorization(user) -> str:
    return api_for(user)._credentials["HTTP_AUTHORIZATION"]  # whatever token scheme the API uses


@pytest.fixture
def world(live_server) -> World:
    org = OrganizationFactory(slug="acme", name="Acme")
    project = ProjectFactory(organization=org, slug="default")
    personas = {role: MembershipFactory(organization=org, role=role, user__username=name).user
                for name, role in (("ada", "admin"), ("rita", "reviewer"), ("sam", "submitter"))}
    task = open_review(project)
    requirement = task.requirement
    for source, route in (("self_test", "engineer"), ("step", "retry")):
        FailureRoute.objects.create(organization=org, requirement=requirement, source=source, summary="tests failed",
                                    route=route, rule="r", matched=["r"], trace=[{"rule": "r"}], action="retried")
    LLMCall.objects.create(requirement=requirement, role="product_owner", provider="replay", model="m",
                           system_sha256="0" * 64, system="s", tool_name="t", input_tokens=10, cost_usd=Decimal("0.25"))
    decided = open_review(project, title="Decided")
    decide(decided, personas["reviewer"], "approve")
    conversation, approval, rejected = asked(personas["admin"], project)
    # sam takes part in the conversation, so sees its requests, but may not decide a review: the approvals' 403
    ConversationParticipant.objects.create(conversation=conversation, user=personas["submitter"])
    browser = Client()
    browser.force_login(personas["admin"])
    proposal, rejection = (propose_prompt(project, personas["submitter"], f"\nIdea {n}.") for n in (1, 2))
    Membership.objects.create(user=personas["submitter"], organization=evaluator()[1], role="reviewer")  # its runs
    proposed_again = {"project": str(project.pk), "artifact": "prompts", "current_run": proposal.current_run_id,
                      "candidate": {"product_owner": prompt_files()["product_owner"] + "\nIdea 1."},
                      "candidate_run": proposal.candidate_run_id, "expected_effect": "the same, sent again"}
    promotion_decide(decision_id=rejection.pk, actor=Actor.human(personas["admin"], "api"), decision="reject",
                     reason="not now")
    return World(url=live_server.url, ids={"requirements": str(requirement.pk), "review-tasks": str(task.pk),
                                           "projects": str(project.pk), "conversations": str(conversation.pk),
                                           "approvals": str(approval.pk), "promotions": str(proposal.pk)},
                 tokens={name: authorization(user) for name, user in
                         (("ada", personas["admin"]), ("rita", personas["reviewer"]), ("sam", personas["submitter"]))},
                 decided_task=str(decided.pk), decided_approval=str(rejected.pk), decided_promotion=str(rejection.pk),
                 proposed_again=proposed_again,
                 session=browser.cookies[settings_module.SESSION_COOKIE_NAME].value)


def asked(user, project):
    """A conversation of `user`'s, with two approval requests its assistant made: one pending, one rejected."""
    conversation, _ = conversation_start(actor=Actor.human(user, "api"), organization=project.organization,
                                         text="What is waiting?")
    pending, rejected = (approval_request(proposed=propose_review_decision(
        organization_id=project.organization_id, task_id=open_review(project, title=title).pk, decision="approve"),
        asker=user, conversation=conversation) for title in ("Asked", "Asked and rejected"))
    approval_decide(approval_id=rejected.pk, actor=Actor.human(user, "api"), approve=False)
    return conversation, pending, rejected


def generated() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


# Loaded at collection (schemathesis' lazy fixture loader does not run on this pytest); the test below checks that
# the live server serves this same schema.
schema = schemathesis.openapi.from_dict(generated(), config=CONFIG)


def test_the_server_serves_the_schema_the_cases_come_from(world):
    served = requests.get(f"{world.url}/api/schema/?format=json", headers=world.headers(), timeout=30)
    assert served.status_code == 200 and served.json() == json.loads(json.dumps(generated()))


@schema.parametrize()
@settings(max_examples=15, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_live_api_answers_as_its_schema_says(case, world):
    if case.path_parameters and "id" in case.path_parameters:
        case.path_parameters["id"] = world.ids[case.path.split("/")[3]]  # a seeded object, not a drawn uuid
    case.call_and_validate(base_url=world.url, headers=world.headers())


def documented() -> list[tuple[str, str, str]]:
    return [(method, path, code) for path, operations in generated()["paths"].items()
            for method, operation in operations.items()
            for code in operation["responses"] if code.startswith("4") and code != "429"]  # 429: the throttle's tests


def provoke(world: World, method: str, path: str, code: str) -> requests.Response:
    """A request that should get `code` from the operation."""
    collection = path.split("/")[3]
    target = world.ids[collection] if "{id}" in path else None
    retriage, cancel = path.endswith("/retriage/"), path.endswith("/cancel/")
    body = ({"brief": "ok"} if path == "/api/v1/requirements/" else {"decision": "approve"} if "decision" in path
            else {"autonomous_deployments": False} if collection == "projects"
            else {"playbook": "bug_fix", "reason": "a crash"} if retriage
            else {"reason": "no longer wanted"} if cancel
            else {"text": "What is waiting?"} if collection == "conversations"
            else {"project": str(uuid.uuid4()), "artifact": "budgets", "candidate": {}, "current_run": 1,
                  "candidate_run": 2, "expected_effect": "fewer loops"} if path == "/api/v1/promotions/"
            else {"reason": "checked", **({"modified": {"product_owner": "Be brief."}} if path.endswith("/modify/")
                                          else {})} if collection == "promotions" else {})
    headers = world.headers()
    if cancel and code in ("403", "409"):  # a requirement of its own: cancelling the seeded one ends other cases
        target = requests.post(f"{world.url}/api/v1/requirements/", json={"brief": "to be cancelled"},
                               headers=headers, timeout=30).json()["id"]
    if code == "400":
        headers = {"Authorization": "Token abc\x00def"}  # the probe's 500: a NUL reaching the token lookup
    elif code == "401":
        headers = {}
    elif code == "403" and (collection == "conversations" or path == "/api/v1/promotions/"):
        # every member may ask or propose: a session without its CSRF token
        headers = {"Cookie": f"{settings_module.SESSION_COOKIE_NAME}={world.session}"}
    elif code == "403":  # a member without the role (deciding a retriage is the reviewer's, submitting is not;
        # cancelling is the reviewer's or the submitter's own, not another submitter's)
        headers = world.headers("rita" if collection == "requirements" and not (retriage or cancel) else "sam")
    elif code == "404":
        target = str(uuid.uuid4())
    elif code == "409" and collection == "review-tasks":
        target = world.decided_task
    elif code == "409" and collection == "approvals":
        target = world.decided_approval
    elif code == "409" and path == "/api/v1/promotions/":  # the same candidate waits already
        body, headers = world.proposed_again, world.headers("sam")
    elif code == "409" and collection == "promotions":  # decided already (a rejection adopted nothing to roll back)
        target = world.decided_promotion
    elif code == "409" and cancel:  # cancelled already
        requests.post(f"{world.url}{path.replace('{id}', target)}", json=body, headers=headers, timeout=30)
    elif code == "409" and retriage:  # planning has started: too late to change the playbook
        Step.objects.get_or_create(requirement_id=target, key="tl_plan", attempt=1, defaults={"state": "done"})
    elif code == "409":  # a replay of it is still running (no worker here to run it)
        requests.post(f"{world.url}{path.replace('{id}', target)}", json={}, headers=headers, timeout=30)
    elif code == "422":
        requests.post(f"{world.url}{path}", json={"brief": "first"}, headers={**headers, "Idempotency-Key": "k1"})
        headers = {**headers, "Idempotency-Key": "k1"}
    url = world.url + path.replace("{id}", target or "")
    if code == "413":  # a JSON body over the size Django reads
        big = json.dumps({**body, "padding": "a" * settings_module.DATA_UPLOAD_MAX_MEMORY_SIZE}).encode()
        return requests.request(method, url, data=big, headers={**headers, "Content-Type": "application/json"},
                                timeout=30)
    if code == "415":
        return requests.request(method, url, data=b"approve", headers={**headers, "Content-Type": "text/plain"},
                                timeout=30)
    return requests.request(method, url, json=body if method in ("post", "patch") else None, headers=headers,
                            timeout=30)


def test_every_error_status_the_schema_documents_is_real(world):
    cases = documented()
    assert {code for _, _, code in cases} >= {"400", "401", "403", "404", "409", "422"}
    wrong = [(method, path, code, response.status_code, response.text[:120]) for method, path, code in cases
             if str((response := provoke(world, method, path, code)).status_code) != code
             or not response.headers["Content-Type"].startswith("application/json")]
    assert not wrong, wrong
