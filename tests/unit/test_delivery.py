"""Delivery against a real bare repository and the fake GitHub pulls API.

The workspace has `main` (already on the remote) and the delivered branch with two commits
on top. Rejections come from a pre-receive hook: tests run as root, which ignores file modes.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from agents.delivery import DeliveryError, DeliveryPlan, GitHubClient, GitHubSettings, Remote, deliver, strip_credentials
from agents.delivery.errors import NoAnswer
from agents.delivery.git_remote import push_branch, remote_branches
from tests.fakes.github_server import FakeGitHubServer

BRANCH = "aiteam/req-7"
TOKEN = "ghp_fakeTOKEN0123456789abcdef"
GIT_ENV = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


def hook(remote: Path, name: str, script: str) -> None:
    path = remote / "hooks" / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], env=GIT_ENV, check=True)
    return path


@pytest.fixture
def workspace(tmp_path: Path, remote: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("demo\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "push", "-q", str(remote), "main")
    git(path, "checkout", "-q", "-b", BRANCH)
    for name in ("calc.py", "test_calc.py"):
        (path / name).write_text(f"# {name}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"add {name}")
    return path


@pytest.fixture
def github():
    with FakeGitHubServer(TOKEN) as fake:
        yield fake


def allowed(remote: Path | str) -> Remote:
    """A local remote allowed as its directory's own repository; a URL's host allowed."""
    if isinstance(remote, Path):
        return Remote(str(remote), local_root=remote.parent, own_path=remote.name)
    return Remote(remote, hosts=("127.0.0.1",))


def plan_for(workspace: Path, remote: Path | str, github: FakeGitHubServer | None = None, token: str = TOKEN) -> DeliveryPlan:
    settings = GitHubSettings(repository="acme/shop", token=token, api_url=github.url, timeout_s=5) if github else None
    return DeliveryPlan(workspace=workspace, branch=BRANCH, remote=allowed(remote), github=settings,
                        title="Add calc", body="Implements the calculator stories.")


def test_it_pushes_the_branch_at_the_workspace_head_and_reports_what_it_pushed(workspace, remote):
    events: list[dict] = []

    result = deliver(plan_for(workspace, remote), on_event=events.append)

    head = git(workspace, "rev-parse", BRANCH)
    assert result.succeeded, result.error
    assert remote_branches(workspace, allowed(remote))[BRANCH] == head == result.head_commit
    assert [subject for _, subject in result.pushed_commits] == ["add calc.py", "add test_calc.py"]
    assert result.pushed_commits[-1][0] == head
    assert (result.steps, result.compensations, result.already_on_remote, result.pull_request) == (["push"], [], False, None)
    assert [e["type"] for e in events] == ["step_started", "step_succeeded", "delivery_finished"]
    assert json.loads(json.dumps(result.to_dict()))["pushed_commits"][0] == {"sha": result.pushed_commits[0][0],
                                                                           "subject": "add calc.py"}


def test_pushing_the_same_commit_again_is_a_no_op(workspace, remote, tmp_path):
    pushes = tmp_path / "pushes.log"
    hook(remote, "post-receive", f"cat >> {pushes}")
    first = deliver(plan_for(workspace, remote))

    again = deliver(plan_for(workspace, remote))

    assert first.succeeded and again.succeeded
    assert (first.already_on_remote, again.already_on_remote) == (False, True)
    assert again.head_commit == first.head_commit and again.pushed_commits == first.pushed_commits
    assert len(pushes.read_text().splitlines()) == 1  # the remote received one push in all


def test_a_rejected_push_fails_and_leaves_nothing_on_the_remote(workspace, remote):
    hook(remote, "pre-receive", "echo 'pushes are frozen today' >&2; exit 1")

    result = deliver(plan_for(workspace, remote))

    assert not result.succeeded
    assert "pushes are frozen today" in result.error
    assert result.steps == []
    assert all(c.ok for c in result.compensations)
    assert BRANCH not in remote_branches(workspace, allowed(remote))


def test_a_remote_that_does_not_exist_is_a_failed_result_not_an_exception(workspace, tmp_path):
    result = deliver(plan_for(workspace, tmp_path / "no-such-remote.git"))

    assert not result.succeeded
    assert "does not appear to be a git repository" in result.error


def test_a_failed_pull_request_deletes_the_branch_this_delivery_pushed(workspace, remote, github):
    github.fail_next_create(500, "GitHub is having a bad day")

    result = deliver(plan_for(workspace, remote, github))

    assert not result.succeeded
    assert "500" in result.error and "GitHub is having a bad day" in result.error
    assert result.steps == ["push"]
    assert [(c.name, c.ok) for c in result.compensations] == [("delete remote branch", True)]  # no PR to close
    assert BRANCH not in remote_branches(workspace, allowed(remote))
    assert github.creations == 0


def test_a_failed_pull_request_moves_a_branch_it_fast_forwarded_back(workspace, remote, github):
    older = git(workspace, "rev-parse", f"{BRANCH}~1")
    git(workspace, "push", "-q", str(remote), f"{older}:refs/heads/{BRANCH}")
    github.fail_next_create(422, "Validation Failed")

    result = deliver(plan_for(workspace, remote, github))

    assert [(c.name, c.ok) for c in result.compensations] == [("restore remote branch", True)]
    assert remote_branches(workspace, allowed(remote))[BRANCH] == older


def test_a_redelivery_after_a_crash_between_push_and_pull_request_pushes_once_and_opens_one_pull(workspace, remote, github):
    push_branch(workspace, BRANCH, allowed(remote))  # the first run died right after this

    result = deliver(plan_for(workspace, remote, github))
    again = deliver(plan_for(workspace, remote, github))

    assert result.succeeded and again.succeeded
    assert result.already_on_remote and result.pull_request["reused"] is False
    assert again.pull_request == {**result.pull_request, "reused": True}
    assert github.creations == 1 and len(github.open_pulls(BRANCH)) == 1
    heads = git(workspace, "ls-remote", "--heads", str(remote)).splitlines()
    assert [line.split("\t")[1] for line in heads].count(f"refs/heads/{BRANCH}") == 1


def test_a_pull_request_whose_reply_was_lost_is_found_by_its_branch_and_adopted(workspace, remote, github):
    """GitHub created the pull request but its answer came after the client's timeout: the run looks it up by its
    branch and takes it as the one it opened, instead of closing it (a retry would then open a second)."""
    github.stall_next_create_reply(2.0)
    plan = plan_for(workspace, remote, github)
    lost = deliver(DeliveryPlan(**{**plan.__dict__, "github": GitHubSettings(
        repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=0.5)}))

    assert lost.succeeded, lost.error
    assert lost.compensations == [] and lost.pull_request["reused"] is False
    assert github.creations == 1 and [p["number"] for p in github.open_pulls(BRANCH)] == [lost.pull_request["number"]]
    again = deliver(plan)
    assert again.succeeded and again.pull_request == {**lost.pull_request, "reused": True} and github.creations == 1


def test_a_5xx_after_the_host_opened_the_pull_request_adopts_it_and_a_4xx_compensates(workspace, remote, github):
    github.fail_next_create(502, "Bad Gateway", created=True)  # a gateway gave up while GitHub carried on

    result = deliver(plan_for(workspace, remote, github))

    assert result.succeeded and result.compensations == [] and github.creations == 1
    assert result.pull_request["number"] == github.open_pulls(BRANCH)[0]["number"]
    github.open_pulls(BRANCH)[0]["state"] = "closed"
    git(workspace, "commit", "-q", "--allow-empty", "-m", "more")
    github.fail_next_create(422, "Validation Failed")  # definite: it opened none
    refused = deliver(plan_for(workspace, remote, github))
    assert not refused.succeeded and [c.name for c in refused.compensations] == ["restore remote branch"]


def test_a_reused_pull_request_gets_this_runs_title_and_body(workspace, remote, github, monkeypatch):
    """The same branch's next delivery (ADR 42) reuses the open pull request: it must describe this run's change,
    and get its earlier text back when the delivery then fails."""
    first = deliver(DeliveryPlan(**{**plan_for(workspace, remote, github).__dict__, "body": "first run"}))
    git(workspace, "commit", "-q", "--allow-empty", "-m", "second run")
    second = deliver(DeliveryPlan(**{**plan_for(workspace, remote, github).__dict__, "title": "Second title",
                                     "body": "second run, touches CI", "last_pushed": first.head_commit}))

    assert second.succeeded and second.pull_request["reused"] is True
    (pull,) = github.pulls.values()
    assert (pull["title"], pull["body"]) == ("Second title", "second run, touches CI")
    assert github.edits == [(pull["number"], {"title": "Second title", "body": "second run, touches CI"})]

    real_update, calls = GitHubClient.update_pull, []

    def lost_answer(self, *args):  # the first PATCH is done, its answer lost; the undo's goes through
        calls.append(real_update(self, *args))
        if len(calls) == 1:
            raise NoAnswer("GitHub PATCH: ReadTimeout (fake)")

    monkeypatch.setattr(GitHubClient, "update_pull", lost_answer)
    git(workspace, "commit", "-q", "--allow-empty", "-m", "third run")
    third = deliver(DeliveryPlan(**{**plan_for(workspace, remote, github).__dict__, "title": "Third title",
                                    "body": "third run", "last_pushed": second.head_commit}))
    assert not third.succeeded
    assert [(c.name, c.ok) for c in third.compensations] == [("restore pull request text", True),
                                                              ("restore remote branch", True)]
    assert (pull["title"], pull["body"]) == ("Second title", "second run, touches CI")


def test_a_pull_request_someone_else_opened_meanwhile_is_not_closed_by_the_undo(workspace, remote, github, monkeypatch):
    """GitHub answered the POST with 422 (a pull request for the branch appeared between the lookup and the POST):
    this run opened none, so its undo closes none."""
    theirs = GitHubClient(TOKEN, api_url=github.url).open_pull("acme/shop", BRANCH, "main", "Theirs", "")
    looked_up = []
    real_find = GitHubClient.find_open_pull

    def find_before_theirs(self, repo, head_branch):
        looked_up.append(head_branch)
        return None if len(looked_up) == 1 else real_find(self, repo, head_branch)

    monkeypatch.setattr(GitHubClient, "find_open_pull", find_before_theirs)

    result = deliver(plan_for(workspace, remote, github))

    assert not result.succeeded and "422" in result.error
    assert [(c.name, c.ok) for c in result.compensations] == [("delete remote branch", True)]
    assert [p["number"] for p in github.open_pulls(BRANCH)] == [theirs["number"]] and looked_up == [BRANCH]


def test_a_failed_pull_request_keeps_a_branch_an_earlier_run_pushed(workspace, remote, github):
    push_branch(workspace, BRANCH, allowed(remote))
    github.fail_next_create(500)

    result = deliver(plan_for(workspace, remote, github))

    assert not result.succeeded and result.compensations == []
    assert BRANCH in remote_branches(workspace, allowed(remote))


def test_the_token_never_appears_in_results_errors_or_logs(workspace, remote, github, caplog):
    caplog.set_level(logging.DEBUG)
    events: list[dict] = []
    github.fail_next_create(422, f"token {TOKEN} is not allowed here")  # an error body that echoes the token
    failed = deliver(plan_for(workspace, remote, github), on_event=events.append)
    wrong = deliver(plan_for(workspace, remote, github, token=TOKEN[::-1]), on_event=events.append)
    done = deliver(plan_for(workspace, remote, github), on_event=events.append)

    assert not failed.succeeded and "is not allowed here" in failed.error
    assert not wrong.succeeded and "401 Bad credentials" in wrong.error
    assert done.succeeded
    assert github.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"
    stored = json.dumps([r.to_dict() for r in (failed, wrong, done)] + events) + repr(plan_for(workspace, remote, github))
    assert TOKEN not in stored and TOKEN[::-1] not in stored
    assert TOKEN not in caplog.text and TOKEN[::-1] not in caplog.text


def test_credentials_in_the_remote_url_never_reach_the_result(workspace):
    result = deliver(plan_for(workspace, "https://deployer:s3cr3t@127.0.0.1:9/acme/shop.git"))

    assert not result.succeeded and result.error
    assert result.remote_url == "https://127.0.0.1:9/acme/shop.git"
    assert "s3cr3t" not in json.dumps(result.to_dict())
    assert strip_credentials("see https://x-access-token:abc@github.com/a/b and git@github.com:a/b") == \
        "see https://github.com/a/b and git@github.com:a/b"


def test_the_github_client_finds_opens_and_closes_a_pull_request(github):
    with GitHubClient(TOKEN, api_url=github.url, timeout_s=5) as client:
        assert client.find_open_pull("acme/shop", BRANCH) is None
        opened = client.open_pull("acme/shop", BRANCH, "main", "Add calc", "body")
        assert client.find_open_pull("acme/shop", BRANCH)["number"] == opened["number"]
        client.close_pull("acme/shop", opened["number"])
        assert client.find_open_pull("acme/shop", BRANCH) is None
        with pytest.raises(DeliveryError, match="422 Validation Failed"):
            client.open_pull("acme/shop", BRANCH, "main", "", "")


def test_an_unreachable_github_is_a_delivery_error():
    with GitHubClient(TOKEN, api_url="http://127.0.0.1:9", timeout_s=2) as client, pytest.raises(DeliveryError) as caught:
        client.find_open_pull("acme/shop", BRANCH)
    assert "ConnectError" in str(caught.value) and TOKEN not in str(caught.value)


def test_an_unexpected_error_after_the_push_still_undoes_the_push_and_is_raised(workspace, remote, github, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the pull request step")

    monkeypatch.setattr(GitHubClient, "open_pull", broken)

    with pytest.raises(RuntimeError, match="a bug"):
        deliver(plan_for(workspace, remote, github))
    assert BRANCH not in remote_branches(workspace, allowed(remote))
