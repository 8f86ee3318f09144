"""`make ticket-demo`'s path, as the Makefile runs it: the fake GitHub host (tests/fakes/host.py) around
`aiteam_ticket` on the sample ticket's cassette, in processes of their own on a clean embedded default. The branch
is pushed over https with the demo's token and a draft pull request opened through the REST API; the token is
never printed. The host stops however the command ends and hands back its exit status."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from lifecycle.management.commands.aiteam_ticket import ticket_key
from tests.fakes.host import TOKEN_ENV
from tests.repo_history import git
from tests.ticket_corpus import SAMPLE
from tests.ticket_corpus.base import write_history

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # the run's tests go through the sandbox
TOKEN = "ghp_ticketDemoTOKEN0123456789abcdef"
TICKET = Path(settings.BASE_DIR) / "agents/cassettes/sample_ticket"
HOST = [sys.executable, "-m", "tests.fakes.host"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)


@pytest.fixture
def clean_state(tmp_path, tmp_path_factory) -> dict[str, str]:
    """The embedded default under tmp_path, migrated, offline (no package index), the demo's token set."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "ANTHROPIC_API_KEY", "DJANGO_SETTINGS_MODULE"}}
    env |= {"AITEAM_VAR_DIR": str(tmp_path / "var"), "AITEAM_PIP_INDEX_URL": "", TOKEN_ENV: TOKEN,
            "AITEAM_ENVIRONMENTS_ROOT": str(tmp_path_factory.getbasetemp() / "ticket-demo-envs")}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=settings.BASE_DIR, check=True,
                   timeout=120)
    return env


def test_the_ticket_demo_ends_at_a_draft_pull_request_on_the_fake_host(clean_state, tmp_path):
    sample = tmp_path / "sample-ticket-repo"
    base = write_history(SAMPLE, sample)[-1]
    title = (TICKET / "title.txt").read_text().strip()

    done = _run([*HOST, "--repo", str(sample), "--as", "demo/textkit", "--root", str(tmp_path / "host"), "--",
                 sys.executable, "manage.py", "aiteam_ticket", "--repo", "{git_url}", "--host", "github",
                 "--api-url", "{api_url}", "--token-env", "{token_env}", "--base", "main", "--title", title,
                 "--body-file", str(TICKET / "body.md"), "--cassette", str(TICKET / "cassette.json"),
                 "--approve-deployment"], clean_state)

    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    [pull] = json.loads((tmp_path / "host/pulls.json").read_text())
    bare, branch = tmp_path / "host/demo/textkit.git", pull["head"]["ref"]
    assert pull["draft"] is True and pull["base"]["ref"] == "main" and pull["title"] == title
    assert branch.startswith("aiteam/") and git(bare, "merge-base", "main", branch).strip() == base
    key = ticket_key(title, (TICKET / "body.md").read_text())
    assert f"Ticket (cli): `{key}`" in pull["body"] and "## Tests" in pull["body"], pull["body"]
    assert f"pull request #{pull['number']}: {pull['html_url']} (draft)\ntitle: {title}" in done.stdout
    assert "remote: https://127.0.0.1:" in done.stdout and f"branch: {branch}" in done.stdout
    assert "--- Change" in done.stdout and "before (base commit)" in done.stdout
    assert "QC's reproduction tests/acceptance/" in done.stdout
    assert ": failed at the base commit, passed after the change\n" in done.stdout
    assert TOKEN not in out


def test_the_host_stops_when_the_command_fails_and_hands_back_its_status(tmp_path):
    sample = tmp_path / "sample-ticket-repo"
    write_history(SAMPLE, sample)
    script = "import os, sys; print(sys.argv[1:], sorted(k for k in os.environ if k.startswith('AITEAM_'))); sys.exit(3)"

    done = _run([*HOST, "--repo", str(sample), "--root", str(tmp_path / "host"), "--", sys.executable, "-c", script,
                 "{git_url}", "{token_env}"], {"PATH": os.environ["PATH"]})

    assert done.returncode == 3, done.stderr
    assert "/demo/repository.git', 'AITEAM_DEMO_GITHUB_TOKEN']" in done.stdout
    assert "'AITEAM_GITHUB_API_URLS', 'AITEAM_GIT_CA_FILE', 'AITEAM_GIT_HOSTS', 'AITEAM_TOKEN_ENVS'" in done.stdout
    assert json.loads((tmp_path / "host/pulls.json").read_text()) == []  # written on the way out
    assert git(tmp_path / "host/demo/repository.git", "rev-parse", "main") == git(sample, "rev-parse", "main")
