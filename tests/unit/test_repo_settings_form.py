"""The settings a run on a repository reads are checked when an admin saves the project (issue 23): a wrong type, a
limit under 1, a role no repository run has, a host the operator does not list are field errors naming the key, by
the one check (lifecycle.repo_settings.repository_settings_problems). The API writes no settings (PATCH takes
autonomous_deployments only, a pre-authorization), so the admin form is the one writer to guard."""
import json

import pytest

from lifecycle.api.serializers import ProjectIn
from lifecycle.repo_settings import repository_settings_problems
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
