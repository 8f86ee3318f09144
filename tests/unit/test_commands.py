"""The management commands: API accounts, and the demo from a clean state with no network."""
import os
import shutil
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from lifecycle.models import Membership
from tests.conftest import api_for


@pytest.mark.django_db
def test_aiteam_user_creates_org_user_and_token_once():
    out1, out2 = StringIO(), StringIO()
    call_command("aiteam_user", org="acme", username="alice", role="reviewer", stdout=out1)
    call_command("aiteam_user", org="acme", username="alice", role="admin", stdout=out2)
    token = out1.getvalue().strip()
    assert token == out2.getvalue().strip() == Token.objects.get(user__username="alice").key
    membership = Membership.objects.get(user__username="alice")
    assert (membership.organization.slug, membership.role) == ("acme", "admin")
    assert membership.organization.projects.filter(slug="default").exists()


@pytest.mark.django_db
def test_the_printed_token_works_on_the_api():
    out = StringIO()
    call_command("aiteam_user", org="acme", username="bob", role="submitter", stdout=out)
    client = api_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Token {out.getvalue().strip()}")
    assert client.get("/api/v1/requirements/").status_code == 200


def test_make_demo_runs_offline_without_a_key_from_a_clean_state(tmp_path):
    """The demo as `make demo` runs it, in a network namespace with no network at all where possible."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "ANTHROPIC_API_KEY", "DJANGO_SETTINGS_MODULE"}}
    env |= {"AITEAM_VAR_DIR": str(tmp_path), "ANTHROPIC_BASE_URL": "http://192.0.2.1:9"}  # unroutable if ever used
    isolate = ["unshare", "-n"] if shutil.which("unshare") and _unshare_works() else []
    manage = [sys.executable, "manage.py"]
    subprocess.run(isolate + manage + ["migrate", "-v0"], env=env, cwd=settings.BASE_DIR, check=True, timeout=120)
    demo = subprocess.run(isolate + manage + ["aiteam_demo"], env=env, cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "state: deployed" in demo.stdout
    assert demo.stdout.count("[approved]") == 4
    assert "autonomous mode: approving" in demo.stderr
    for event in ("clarify", "create_stories", "approve_design", "retry_development", "pass_code_review",
                  "pass_quality_gate", "deploy"):
        assert event in demo.stdout
    assert "attempt 1: 13 passed, 1 failed" in demo.stdout and "attempt 2: 14 passed, 0 failed" in demo.stdout
    assert "T2: fix (attempt 2)" in demo.stdout and str(tmp_path / "workspaces") in demo.stdout
    assert "--- Delivered: yes" in demo.stdout and f"remote: {tmp_path / 'remotes'}" in demo.stdout


def _unshare_works() -> bool:
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
