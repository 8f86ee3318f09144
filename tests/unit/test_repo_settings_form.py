"""The settings a run on a repository reads are checked when an admin saves the project (issue 23): a wrong type, a
limit under 1, a role no repository run has, a host the operator does not list are field errors naming the key, by
the one check (lifecycle.repo_settings.repository_settings_problems). The API writes no settings (PATCH takes
autonomous_deployments only, a pre-authorization), so the admin form is the one writer to guard."""
import json
import os
import subprocess
import sys

import pytest

from lifecycle.api.serializers import ProjectIn
from lifecycle.repo_settings import repository_settings_problems
from lifecycle.services.host_settings import github_settings
from tests.conftest import staff_client
from tests.factories import MembershipFactory, project_form_data

GOOD = {"scope": {"max_lines": 120, "max_modules": 1}, "draft": False, "ticket_comments": True,
        "context_tokens": {"qc_engineer": 4000, "tech_lead": 9000}, "test_command": "pytest -q tests",
        "gitlab": {"project": "acme/shop", "url": "https://gitlab.com"},
        "jira": {"site_url": "https://acme.atlassian.net", "email": "bot@acme.test", "token_env": "ACME_JIRA_TOKEN"}}
BAD = [
    ({"scope": {"max_lines": -5}}, "settings.scope.max_lines must be a whole number above 0, not -5"),
    ({"scope": {"max_line": 50}}, "settings.scope has no key max_line: it takes max_lines and max_modules"),
    ({"scope": [300]}, "settings.scope must be a JSON object"),
    ({"draft": "no"}, "draft must be true or false, not 'no'"),
    ({"ticket_comments": 0}, "ticket_comments must be true or false, not 0"),
    ({"context_tokens": {"qc": 4000}}, 'settings["context_tokens"] names no role of a repository run: qc (the roles '
                                       'are tech_lead, senior_engineer, qc_engineer)'),
    ({"context_tokens": {"qc_engineer": "8k"}}, 'settings["context_tokens"]["qc_engineer"]: a token budget is a '
                                                "whole number >= 0, not '8k'"),
    ({"context_tokens": {"tech_lead": 100}}, 'settings["context_tokens"]["tech_lead"] is 100: at least 500 tokens'),
    ({"test_command": ["pytest"]}, "test_command must be a command line such as 'pytest tests', not ['pytest']"),
    ({"test_command": "pytest 'tests"}, "test_command \"pytest 'tests\" cannot be split into words"),
    ({"gitlab": {"project": "acme/shop", "url": "https://evil.test"}},
     "settings.gitlab.url 'https://evil.test' is not one of the operator's AITEAM_GITLAB_URLS (https://gitlab.com)"),
    ({"gitlab": {"project": 7}}, "settings.gitlab.project must be a non-empty string, e.g. group/name"),
    ({"github": {"repo": "acme/shop"}}, "settings.github has no key repo: it takes repository, api_url"),
    ({"jira": {"site_url": "https://acme.atlassian.net", "token_env": "ANTHROPIC_API_KEY"}},
     "'ANTHROPIC_API_KEY' is not one of the operator's AITEAM_TOKEN_ENVS (ACME_JIRA_TOKEN)"),
]


@pytest.fixture
def lists(settings):
    settings.AITEAM_TOKEN_ENVS = ["ACME_JIRA_TOKEN"]
    settings.AITEAM_GITLAB_URLS = ["https://gitlab.com"]
    settings.AITEAM_JIRA_URLS = ["https://acme.atlassian.net"]


def save(project, settings_json: dict):
    boss = MembershipFactory(organization=project.organization, role="admin", user__username="boss").user
    return staff_client(boss).post(f"/admin/lifecycle/project/{project.pk}/change/",
                                   project_form_data(project, settings=json.dumps(settings_json)))


def test_the_repository_settings_an_admin_saves_are_kept(acme_project, lists):
    assert repository_settings_problems(GOOD) == []
    assert save(acme_project, GOOD).status_code == 302
    acme_project.refresh_from_db()
    assert acme_project.settings == GOOD


@pytest.mark.parametrize(("bad", "said"), BAD)
def test_a_bad_repository_setting_is_a_field_error_naming_its_key(acme_project, lists, bad, said):
    response = save(acme_project, {**GOOD, **bad})
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["settings"]
    assert error.startswith(said)
    acme_project.refresh_from_db()
    assert acme_project.settings == {}


def test_the_api_writes_no_settings():
    assert set(ProjectIn().fields) == {"autonomous_deployments"}


@pytest.mark.django_db
def test_an_api_url_the_form_takes_is_one_delivery_takes_however_either_side_writes_its_slash(
        acme_project, lists, settings, monkeypatch):
    """One normal form for API URLs (agents.delivery.api.normalized_api_url): the operator's lists, the form and
    the host settings read at delivery all compare without the trailing slash."""
    monkeypatch.setenv("ACME_JIRA_TOKEN", "secret-value")
    acme_project.host_kind, acme_project.token_env = "github", "ACME_JIRA_TOKEN"
    for listed, saved in [("https://api.github.com", "https://api.github.com/"),
                          ("https://ghe.example/api/v3/", "https://ghe.example/api/v3")]:
        settings.AITEAM_GITHUB_API_URLS = [listed]
        value = {"github": {"repository": "acme/app", "api_url": saved}}
        assert repository_settings_problems(value) == []
        acme_project.settings = value
        assert github_settings(acme_project).api_url == saved.rstrip("/")
    code = "import django; django.setup(); from django.conf import settings as s; print(s.AITEAM_GITHUB_API_URLS)"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "aiteam.settings",
           "AITEAM_GITHUB_API_URLS": "https://api.github.com/, https://ghe.example/api/v3//"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['https://api.github.com', 'https://ghe.example/api/v3']"
