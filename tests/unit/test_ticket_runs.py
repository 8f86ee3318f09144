"""Every ticket of the corpus (tests/ticket_corpus) through `aiteam_ticket` on the embedded default, offline: the
known fix replayed as the model's answers (agents/cassettes/sample_ticket/make_cassette.py) ends as a draft pull
request on a fake GitHub whose branch shares its history with the base, and the hidden tests, never shown to the
team, pass on the delivered branch. The negative controls stop where they should: a change that breaks a passing
test never reaches delivery, a 400-line change waits for a person with its scope flagged, an answer that changes
nothing is refused. A ticket delivered once can run again and replaces its own branch."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.cassettes.sample_ticket.make_cassette import interactions
from lifecycle.management.commands.aiteam_ticket import operator
from lifecycle.models import Project, Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.states import ArtifactKind
from tests.fakes.github_server import FakeGitHubServer
from tests.repo_history import git
from tests.ticket_corpus import CONTROLS, ENTRIES, SAMPLE
from tests.ticket_corpus.base import Entry, ids_of_tests, write_history

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("sandbox_uid")]
TOKEN = "ghp_ticketRunsTOKEN0123456789abcdef"


@pytest.fixture
def offline(settings, tmp_path, tmp_path_factory) -> Path:
    """Remotes under a local root, environments from local wheels only (a shared cache), no package index."""
    settings.AITEAM_GIT_LOCAL_ROOT = settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    wheels = tmp_path / "wheels"
    for entry in ENTRIES.values():
        for wheel in entry.wheels:
            wheel.write(wheels)
    settings.AITEAM_ENVIRONMENTS_ROOT = tmp_path_factory.getbasetemp() / "ticket-run-envs"
    settings.AITEAM_PIP_INDEX_URL, settings.AITEAM_PIP_FIND_LINKS = "", [wheels]
    return wheels


@pytest.fixture
def github(settings, monkeypatch):
    with FakeGitHubServer(TOKEN) as fake:
        settings.AITEAM_GITHUB_API_URLS = [fake.url]
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        yield fake


def run_ticket(entry: Entry, folder: Path, *, rows: list[dict] | None = None, github=None, approve: bool = True,
               slug: str | None = None) -> tuple[str, Requirement]:
    """The entry's repository with its history in `folder`, its answers as a cassette, then the command."""
    slug = slug or entry.key
    if not (folder / "repo").exists():
        write_history(entry, folder / "repo")
    (folder / "body.md").write_text(entry.body + "\n")
    (folder / "cassette.json").write_text(json.dumps({"interactions": rows or interactions(entry)}))
    args = ["--repo", str(folder / "repo"), "--title", entry.title, "--body-file", str(folder / "body.md"),
            "--cassette", str(folder / "cassette.json"), "--project", slug]
    if github is not None:
        _, organization = operator()
        github.add_issue(f"corpus/{slug}", 1)
        Project.objects.update_or_create(organization=organization, slug=slug, defaults={"name": slug, "settings": {
            "github": {"repository": f"corpus/{slug}", "api_url": github.url}}})
        args += ["--host", "github", "--token-env", "GITHUB_TOKEN"]
    out = StringIO()
    try:
        call_command("aiteam_ticket", *args, *(["--approve-deployment"] if approve else []), stdout=out)
    except CommandError as exc:
        out.write(f"\nCommandError: {exc}\n")
    return out.getvalue(), Requirement.objects.filter(project__slug=slug).latest("created_at")


def hidden_tests_on(entry: Entry, remote: str, branch: str, where: Path, wheels: Path) -> subprocess.CompletedProcess:
    """The delivered branch cloned, the hidden tests added, run with plain pytest (the wheels unpacked on the path)."""
    clone = where / "delivered"
    git(where, "clone", "-q", "-b", branch, remote, str(clone))
    for path, text in entry.hidden.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    site = where / "site"
    for wheel in wheels.glob("*.whl"):
        subprocess.run([sys.executable, "-m", "zipfile", "-e", str(wheel), str(site)], check=True)
    path = ":".join(str(p) for p in (clone, clone / "src", site))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           *ids_of_tests(entry.hidden)], cwd=clone, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path},
                          capture_output=True, text=True)


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_each_ticket_ends_as_a_pull_request_whose_hidden_tests_pass(key, offline, github, tmp_path):
    entry = ENTRIES[key]
    out, req = run_ticket(entry, tmp_path / key, github=github)

    assert req.state == "deployed", out
    delivery = content_json(latest(req, ArtifactKind.DELIVERY))
    remote, branch = delivery["remote_url"], delivery["branch"]
    assert branch.startswith("aiteam/") and git(Path(remote), "merge-base", "main", branch).strip() == req.base_sha
    [pull] = github.open_pulls(branch)
    assert pull["draft"] is True and pull["base"]["ref"] == "main" and req.ticket_key in pull["body"], pull
    assert "## Change" in pull["body"] and "before (at " in pull["body"] and "after: " in pull["body"], pull["body"]
    assert f"pull request #{pull['number']}" in out and TOKEN not in out
    hidden = hidden_tests_on(entry, remote, branch, tmp_path / key, offline)
    assert hidden.returncode == 0, hidden.stdout + hidden.stderr
    assert "--- Tests" in out and "before (base commit)" in out


def _control_rows(control, fix: dict | None = None) -> list[dict]:
    """The entry's answers with the control's as the engineer's, and `fix` as every fix attempt's."""
    rows = copy.deepcopy(interactions(control.entry))
    engineer = next(row for row in rows if row["tool"] == "submit_edits_output")
    engineer["tool_input"] = control.answer
    if fix is not None:
        rows.append({**engineer, "recorded_for": {"summary": control.entry.summary}, "match": ["failing"],
                     "tool_input": fix})
    return rows


def test_a_change_that_breaks_a_passing_test_never_reaches_delivery(offline, tmp_path):
    control = CONTROLS["breaks-a-passing-test"]
    [block] = control.answer["edits"]
    fix = {"reasoning": "Two underscores, then.", "edits": [
        {"path": block["path"], "search": block["replace"], "replace": block["replace"].replace('"_"', '"__"')}]}
    out, req = run_ticket(control.entry, tmp_path / "breaks", rows=_control_rows(control, fix), slug="breaks")

    assert req.state == "escalated", out
    assert not req.artifacts.filter(kind=ArtifactKind.DELIVERY).exists()
    report = content_json(latest(req, ArtifactKind.TEST_REPORT, "self_test"))
    assert "tests/test_slug.py::test_spaces_become_dashes" in report["failing_tests"], report["comparison"]


def test_a_400_line_change_waits_for_a_person_with_its_scope_flagged(offline, tmp_path):
    control = CONTROLS["over-400-lines"]
    out, req = run_ticket(control.entry, tmp_path / "sprawl", rows=_control_rows(control), slug="sprawl",
                          approve=False)

    assert req.state == "ready_to_deploy", out
    task = req.review_tasks.pending().get(kind="deployment_approval")
    assert task.context["scope"]["flagged"] is True and "over the limit of 300" in " ".join(
        task.context["scope"]["reasons"]), task.context["scope"]
    assert not req.artifacts.filter(kind=ArtifactKind.DELIVERY).exists()


def test_an_answer_that_changes_nothing_is_refused_and_a_person_is_asked(offline, tmp_path):
    control = CONTROLS["empty-change"]
    out, req = run_ticket(control.entry, tmp_path / "empty", rows=_control_rows(control), slug="empty")

    assert req.state != "deployed" and "changes nothing" in out, out
    assert req.review_tasks.pending().filter(kind="step_failed").exists()
    assert not req.artifacts.filter(kind=ArtifactKind.DELIVERY).exists()


def test_a_ticket_delivered_once_runs_again_and_replaces_its_own_branch(offline, tmp_path):
    first_out, first = run_ticket(SAMPLE, tmp_path / "again")
    second_out, second = run_ticket(SAMPLE, tmp_path / "again")

    assert first.pk != second.pk and (first.state, second.state) == ("deployed", "deployed"), second_out
    before, after = (content_json(latest(r, ArtifactKind.DELIVERY)) for r in (first, second))
    assert before["branch"] == after["branch"] and after["head_commit"] != before["head_commit"]
    assert git(Path(after["remote_url"]), "rev-parse", after["branch"]).strip() == after["head_commit"]
