"""Delivery of a requirement on an existing repository (ADR 35): its branch, which shares history with the base, is
pushed back with the host's token in git's environment only, and a draft pull request (GitHub) or merge request
(GitLab) opens whose body links the ticket and lists the scope and the tests; a second delivery reuses it, a failed
opening undoes the push. The scope guard flags a large change or one to CI files on the review page, and autonomous
mode leaves it to a person; an empty change is refused before anyone is asked."""
from __future__ import annotations

import io
import logging
from dataclasses import replace

import pytest
from django.core.management import call_command

from agents.delivery import deliver
from agents.delivery.git_remote import remote_branches
from lifecycle.models import ActionPreauthorization, Project, Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.autonomous import deployment_hold
from lifecycle.services.delivery import delivery_plan
from lifecycle.services.development import workspace_for
from lifecycle.services.scope_guard import EMPTY_CHANGE, EmptyChange, empty_change_problem
from tests.conftest import staff_client
from tests.fakes.github_server import FakeGitHubServer
from tests.fakes.gitlab_server import FakeGitLabServer
from tests.flows import decide, fresh, pending
from tests.repo_approval import (
    CART,
    SMALL_CHANGE,
    TOKEN,
    ask_for_deployment,
    commit_change,
    main_of,
    repository_project,
    repository_requirement,
)
from tests.repo_history import git

pytestmark = pytest.mark.django_db(transaction=True)
SMALL = SMALL_CHANGE


@pytest.fixture
def github(settings, monkeypatch):
    with FakeGitHubServer(TOKEN) as fake:
        fake.add_issue("acme/shop", 12)
        settings.AITEAM_GITHUB_API_URLS = [fake.url]
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        yield fake


@pytest.fixture
def gitlab(settings, monkeypatch):
    with FakeGitLabServer(TOKEN) as fake:
        fake.add_project("acme/shop", issues=(12,))
        settings.AITEAM_GITLAB_URLS = [fake.url]
        monkeypatch.setenv("GITLAB_TOKEN", TOKEN)
        yield fake


@pytest.fixture
def on_github(acme_project, github, settings, tmp_path):
    return repository_project(acme_project, tmp_path, settings, host_kind="github", token_env="GITHUB_TOKEN",
                              settings={"github": {"repository": "acme/shop", "api_url": github.url}})


def approved_and_delivered(requirement: Requirement, rita) -> dict:
    decide(pending(requirement, "deployment_approval"), rita, "approve")
    assert fresh(requirement).state == "deployed", fresh(requirement).state
    return content_json(latest(requirement, "delivery"))


def test_a_delivered_requirement_opens_a_draft_pull_request_sharing_history_with_its_base(
        acme_project, on_github, github, rita):
    req = repository_requirement(acme_project, on_github)
    head = commit_change(req, SMALL)
    ask_for_deployment(req)
    result = approved_and_delivered(req, rita)

    branch = workspace_for(fresh(req)).branch
    assert (result["succeeded"], result["branch"], result["head_commit"]) == (True, branch, head)
    assert git(on_github, "rev-parse", f"refs/heads/{branch}").strip() == head
    assert git(on_github, "merge-base", "main", branch).strip() == req.base_sha == main_of(on_github)
    [pull] = github.open_pulls()
    assert result["pull_request"] == {"number": 1, "url": pull["html_url"], "reused": False, "draft": True,
                                      "kind": "pull request", "host": "github"}
    assert (pull["draft"], pull["head"]["ref"], pull["base"]["ref"], pull["title"]) == (True, branch, "main",
                                                                                         "Document the total")
    body = pull["body"]
    assert body.startswith("Fixes #12")
    assert "3 lines changed (+2 −1) in 1 files, 1 top-level modules: `shop`" in body and "within limits" in body
    assert f"before (at {req.base_sha[:12]}): 1 passed, 0 failed" in body and "after: 2 passed, 0 failed" in body


def test_a_second_delivery_reuses_the_pull_request_and_replaces_only_its_own_push(
        acme_project, on_github, github, rita):
    req = repository_requirement(acme_project, on_github)
    first = commit_change(req, SMALL)
    ask_for_deployment(req)
    approved_and_delivered(req, rita)
    # a rework starts again from the base commit: the branch no longer contains the commit delivered before
    Requirement.objects.filter(pk=req.pk).update(workspace_head="")
    second = commit_change(fresh(req), {"src/shop/cart.py": CART.replace("2)", "2)  # cents")}, "T1 (attempt 2)")
    plan = delivery_plan(req.pk)
    assert plan.last_pushed == first and plan.auth is not None

    again = deliver(plan)
    assert again.succeeded, again.error
    assert again.pull_request["reused"] is True and github.creations == 1 and len(github.open_pulls()) == 1
    assert remote_branches(plan.workspace, plan.remote)[plan.branch] == second


def test_a_failing_pull_request_is_compensated_by_deleting_the_pushed_branch(acme_project, on_github, github):
    req = repository_requirement(acme_project, on_github)
    commit_change(req, SMALL)
    github.fail_next_create(500, "GitHub is down")
    plan = delivery_plan(req.pk)

    result = deliver(plan)
    assert not result.succeeded and "GitHub is down" in result.error
    assert [(c.name, c.ok) for c in result.compensations] == [("delete remote branch", True)]
    assert plan.branch not in remote_branches(plan.workspace, plan.remote) and github.open_pulls() == []


def test_a_gitlab_project_gets_a_draft_merge_request_that_closes_its_issue(
        acme_project, gitlab, settings, tmp_path, rita):
    origin = repository_project(acme_project, tmp_path, settings, host_kind="gitlab", token_env="GITLAB_TOKEN",
                                settings={"gitlab": {"project": "acme/shop", "url": gitlab.url}})
    req = repository_requirement(acme_project, origin, ticket=("gitlab", "#12", ""))
    commit_change(req, SMALL)
    ask_for_deployment(req)
    result = approved_and_delivered(req, rita)

    [mr] = gitlab.merge_requests
    assert (mr["title"], mr["draft"], mr["target_branch"]) == ("Draft: Document the total", True, "main")
    assert mr["source_branch"] == result["branch"] and mr["description"].startswith("Closes #12")
    assert result["pull_request"]["kind"] == "merge request" and result["pull_request"]["url"] == mr["web_url"]
    assert git(origin, "merge-base", "main", result["branch"]).strip() == req.base_sha
    again = deliver(replace(delivery_plan(req.pk), title="The total, documented", body="Closes #12, again"))
    assert again.pull_request["reused"] and len(gitlab.merge_requests) == 1
    assert gitlab.edits == [(mr["iid"], {"title": "Draft: The total, documented", "description": "Closes #12, again"})]
    assert mr["draft"] and all(r.headers.get("private-token") == TOKEN for r in gitlab.requests)


def test_a_merge_request_from_a_fork_on_a_branch_of_our_name_is_not_taken_for_ours(
        acme_project, gitlab, settings, tmp_path, rita):
    origin = repository_project(acme_project, tmp_path, settings, host_kind="gitlab", token_env="GITLAB_TOKEN",
                                settings={"gitlab": {"project": "acme/shop", "url": gitlab.url}})
    req = repository_requirement(acme_project, origin, ticket=("gitlab", "#12", ""))
    commit_change(req, SMALL)
    fork = gitlab.add_fork_merge_request("acme/shop", workspace_for(req).branch)
    ask_for_deployment(req)
    result = approved_and_delivered(req, rita)

    ours = [mr for mr in gitlab.merge_requests if mr["source_project_id"] == mr["target_project_id"]]
    assert len(ours) == 1 and result["pull_request"]["url"] == ours[0]["web_url"] != fork["web_url"]
    assert result["pull_request"]["reused"] is False and fork["state"] == "opened"


class LateToOpen(FakeGitLabServer):
    """Opens a merge request as asked, then answers after the client gave up: the answer is lost."""

    def handle(self, request):
        if request.method == "POST" and request.path.endswith("/merge_requests"):
            self.stall_next_reply(2.0)
        return super().handle(request)


def test_a_merge_request_opened_without_an_answer_is_found_by_its_branch_and_adopted(
        acme_project, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("GITLAB_TOKEN", TOKEN)
    with LateToOpen(TOKEN) as gitlab:
        gitlab.add_project("acme/shop", issues=(12,))
        settings.AITEAM_GITLAB_URLS = [gitlab.url]
        origin = repository_project(acme_project, tmp_path, settings, host_kind="gitlab", token_env="GITLAB_TOKEN",
                                    settings={"gitlab": {"project": "acme/shop", "url": gitlab.url}})
        req = repository_requirement(acme_project, origin, ticket=("gitlab", "#12", ""))
        commit_change(req, SMALL)
        plan = delivery_plan(req.pk)
        result = deliver(replace(plan, gitlab=replace(plan.gitlab, timeout_s=0.5)))

        assert result.succeeded and result.compensations == [], result.error
        [mr] = gitlab.merge_requests
        assert mr["state"] == "opened" and result.pull_request["url"] == mr["web_url"]
        assert plan.branch in remote_branches(plan.workspace, plan.remote)


def test_a_project_that_says_draft_false_gets_a_ready_pull_request(acme_project, on_github, github, rita):
    Project.objects.filter(pk=acme_project.pk).update(settings={"github": {"repository": "acme/shop",
                                                                           "api_url": github.url}, "draft": False})
    req = repository_requirement(acme_project, on_github, ticket=("jira", "PROJ-7", "https://acme.atlassian.net/browse/PROJ-7"))
    commit_change(req, SMALL)
    ask_for_deployment(req)
    approved_and_delivered(req, rita)
    [pull] = github.open_pulls()
    assert pull["draft"] is False and pull["title"] == "PROJ-7: Document the total"
    assert "Jira: `PROJ-7`, [open the ticket](https://acme.atlassian.net/browse/PROJ-7)" in pull["body"]


def test_the_token_reaches_the_host_in_a_header_and_never_a_row_or_a_log(
        acme_project, on_github, github, rita, caplog):
    caplog.set_level(logging.DEBUG)
    req = repository_requirement(acme_project, on_github)
    commit_change(req, SMALL)
    ask_for_deployment(req)
    approved_and_delivered(req, rita)
    assert github.requests and all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in github.requests)
    dump = io.StringIO()
    call_command("dumpdata", "lifecycle", stdout=dump)
    assert "lifecycle.artifact" in dump.getvalue() and TOKEN not in dump.getvalue()
    assert TOKEN not in caplog.text and "delivery" in caplog.text


def test_a_change_within_the_limits_is_approved_and_delivered_under_the_projects_pre_authorization(
        acme_project, on_github, github):
    ActionPreauthorization.objects.create(project=acme_project, action="deployment_approval:approve")
    req = repository_requirement(acme_project, on_github)
    commit_change(req, SMALL)
    ask_for_deployment(req)
    task = req.review_tasks.get(kind="deployment_approval")
    assert (task.decided_by_policy, fresh(req).state) == ("pre-authorized", "deployed")
    assert task.context["scope"]["flagged"] is False and len(github.open_pulls()) == 1


@pytest.mark.parametrize("files,reason", [
    ({"src/shop/report.py": "".join(f"LINE_{n} = {n}\n" for n in range(400))},
     "400 lines changed, over the limit of 300"),
    ({".github/workflows/ci.yml": "on: [push]\njobs: {}\n", **SMALL}, "changes CI files: .github/workflows/ci.yml"),
    ({"requirements.txt": "requests==2.32.3\n", **SMALL}, "changes dependency files: requirements.txt"),
])
def test_a_flagged_change_waits_for_a_person_even_when_pre_authorized_and_the_page_says_why(
        acme_project, on_github, github, settings, rita, files, reason):
    settings.AITEAM_AUTONOMOUS = True
    ActionPreauthorization.objects.create(project=acme_project, action="deployment_approval:approve")
    req = repository_requirement(acme_project, on_github)
    commit_change(req, files)
    ask_for_deployment(req)

    task = pending(req, "deployment_approval")
    assert task.decided_by_policy == "" and fresh(req).state == "ready_to_deploy"
    assert reason in task.context["scope"]["reasons"] and reason in deployment_hold(task)
    stored = latest(req, "scope")
    assert stored.metadata["flagged"] and reason in content_json(stored)["reasons"]
    html = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{task.pk}/change/").content.decode()
    assert 'id="scope-warning"' in html and reason in html and "scope-flagged" in html
    assert github.open_pulls() == []


def test_a_change_within_the_limits_shows_its_scope_without_a_warning(acme_project, on_github, github, rita):
    req = repository_requirement(acme_project, on_github)
    commit_change(req, SMALL)
    ask_for_deployment(req)
    task = pending(req, "deployment_approval")
    html = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{task.pk}/change/").content.decode()
    assert 'id="scope"' in html and "3 lines changed (+2 −1) in 1 file;" in html
    assert "scope-warning" not in html and "Within the limits" in html


def test_the_projects_scope_limits_apply_and_a_bad_limit_is_refused_with_its_key(acme_project, on_github, github):
    Project.objects.filter(pk=acme_project.pk).update(settings={"github": {"repository": "acme/shop",
                                                                           "api_url": github.url},
                                                                "scope": {"max_lines": 2}})
    req = repository_requirement(acme_project, on_github)
    commit_change(req, SMALL)
    ask_for_deployment(req)
    assert pending(req, "deployment_approval").context["scope"]["reasons"] == [
        "3 lines changed, over the limit of 2"]
    Project.objects.filter(pk=acme_project.pk).update(settings={"scope": {"max_modules": "two"}})
    other = repository_requirement(acme_project, on_github, ticket=("github", "#13", ""))
    commit_change(other, SMALL)
    with pytest.raises(Exception, match=r"settings.scope.max_modules must be a whole number above 0, not 'two'"):
        ask_for_deployment(other)


def test_an_empty_change_is_refused_before_the_deployment_approval(acme_project, on_github, github):
    req = repository_requirement(acme_project, on_github)
    assert empty_change_problem(fresh(req)) == EMPTY_CHANGE == "the change is empty: nothing differs from the base commit"
    with pytest.raises(EmptyChange, match="the change is empty"):
        ask_for_deployment(req)
    # nothing of the refused approval stays: no task, no scope, not the reports stored in the same transaction
    assert not req.review_tasks.exists() and latest(req, "scope") is None and latest(req, "test_report") is None
    commit_change(req, SMALL)
    assert empty_change_problem(fresh(req)) == ""
