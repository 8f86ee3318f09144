"""A project's repository connection is typed fields (base branch, host kind, token variable, webhook label and
secret variables), validated in the admin form against the operator's allow-lists, read by delivery from those
fields only; migration 0022 moved the older JSON keys into them."""
import importlib
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.core.checks import run_checks
from django.db import connection

from lifecycle.errors import DomainError
from lifecycle.models import Project
from lifecycle.services.delivery import delivery_plan
from lifecycle.services.host_settings import github_settings, jira_settings
from lifecycle.services.repositories import host_auth
from tests.conftest import staff_client
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory, project_form_data
from tests.flows import submit

pytestmark = pytest.mark.django_db
moved = importlib.import_module("lifecycle.migrations.0022_project_repository")


@pytest.fixture
def boss(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="boss").user


@pytest.fixture
def lists(settings):
    settings.AITEAM_TOKEN_ENVS = ["GITHUB_TOKEN", "ACME_GITLAB_TOKEN"]
    settings.AITEAM_WEBHOOK_SECRET_ENVS = ["ACME_HOOK_SECRET", "GLOBEX_HOOK_SECRET"]


def save(user, project: Project, **changes):
    return staff_client(user).post(f"/admin/lifecycle/project/{project.pk}/change/", project_form_data(project, **changes))


def errors(response) -> dict:
    return response.context["adminform"].form.errors


def test_an_admin_saves_the_repository_connection_and_webhook_settings(acme_project, boss, lists):
    response = save(boss, acme_project, repo_url="https://gitlab.com/acme/shop.git", base_branch="release/2.1",
                    host_kind="gitlab", token_env="ACME_GITLAB_TOKEN", webhook_label="ai-team",
                    gitlab_webhook_secret_env="ACME_HOOK_SECRET")
    assert response.status_code == 302
    acme_project.refresh_from_db()
    assert (acme_project.base_branch, acme_project.host_kind, acme_project.token_env, acme_project.webhook_label) == (
        "release/2.1", "gitlab", "ACME_GITLAB_TOKEN", "ai-team")
    assert acme_project.webhook_secret_env("gitlab") == "ACME_HOOK_SECRET"
    assert acme_project.webhook_secret_env("github") == "" and acme_project.webhook_secret_env("bitbucket") == ""


def test_a_variable_the_operator_does_not_list_is_a_form_error_naming_the_list(acme_project, boss, lists):
    response = save(boss, acme_project, token_env="ANTHROPIC_API_KEY", jira_webhook_secret_env="DJANGO_SECRET_KEY")
    assert errors(response)["token_env"] == [
        "'ANTHROPIC_API_KEY' is not one of the operator's AITEAM_TOKEN_ENVS (GITHUB_TOKEN, ACME_GITLAB_TOKEN)"]
    assert "AITEAM_WEBHOOK_SECRET_ENVS" in errors(response)["jira_webhook_secret_env"][0]
    acme_project.refresh_from_db()
    assert acme_project.token_env == "" and acme_project.jira_webhook_secret_env == ""


@pytest.mark.parametrize("branch", ["-main", "a..b", "main.lock", "has space", "a//b", ".hidden", "x/"])
def test_a_branch_git_would_refuse_or_read_as_an_option_is_a_form_error(acme_project, boss, branch):
    assert "a branch name such as main" in errors(save(boss, acme_project, base_branch=branch))["base_branch"][0]


def test_a_bad_label_and_an_unknown_host_kind_are_form_errors(acme_project, boss):
    response = save(boss, acme_project, webhook_label="ai\x07team", host_kind="bitbucket")
    assert "without control characters or surrounding spaces" in errors(response)["webhook_label"][0]
    assert "bitbucket is not one of the available choices" in errors(response)["host_kind"][0]


def test_the_keys_that_became_fields_are_refused_in_the_settings_json(acme_project, boss):
    response = save(boss, acme_project, settings='{"base_branch": "dev", "github": {"token_env": "GITHUB_TOKEN"}}')
    assert errors(response)["settings"] == [
        "base_branch: now a field of the project (base branch), not a settings key",
        "github.token_env: now a field of the project (token env), not a settings key"]


def test_a_webhook_secret_another_organization_names_is_refused(acme_project, boss, lists):
    ProjectFactory(organization=OrganizationFactory(slug="globex"), github_webhook_secret_env="GLOBEX_HOOK_SECRET")
    response = save(boss, acme_project, github_webhook_secret_env="GLOBEX_HOOK_SECRET")
    assert "named by another organization's project" in errors(response)["github_webhook_secret_env"][0]
    sibling = ProjectFactory(organization=acme_project.organization, slug="sibling", gitlab_webhook_secret_env="ACME_HOOK_SECRET")
    assert save(boss, acme_project, github_webhook_secret_env="ACME_HOOK_SECRET").status_code == 302  # same org
    assert sibling.gitlab_webhook_secret_env == "ACME_HOOK_SECRET"


def test_a_token_variable_another_organization_names_is_refused_when_saved_and_when_used(
        acme_project, boss, lists, monkeypatch):
    """Whoever names a token variable sends requests with its token to a repository of their choosing: one
    organization's token is never another's, in the form and where a stored value is used."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-globex-value")
    ProjectFactory(organization=OrganizationFactory(slug="globex"), token_env="GITHUB_TOKEN")
    response = save(boss, acme_project, token_env="GITHUB_TOKEN")
    assert "named by another organization's project" in errors(response)["token_env"][0]
    assert save(boss, acme_project, token_env="ACME_GITLAB_TOKEN").status_code == 302  # its own is fine

    Project.objects.filter(pk=acme_project.pk).update(token_env="GITHUB_TOKEN", host_kind="github")  # stored before
    with pytest.raises(DomainError, match="another organization's project") as refused:
        host_auth(Project.objects.get(pk=acme_project.pk))
    assert "ghp-globex-value" not in str(refused.value)


def test_a_token_variable_named_in_the_jira_settings_is_under_the_same_rule_as_the_field(
        acme_project, boss, lists, settings, monkeypatch):
    """settings.jira.token_env names a host token as the field does: another organization's variable is refused
    there too, so no organization can name acme's token in its Jira settings and so switch it off for acme."""
    settings.AITEAM_JIRA_URLS = ["https://acme.atlassian.net"]
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-globex-value")
    ProjectFactory(organization=OrganizationFactory(slug="globex"), token_env="GITHUB_TOKEN")
    jira = {"site_url": "https://acme.atlassian.net", "email": "bot@acme.test", "token_env": "GITHUB_TOKEN"}
    response = save(boss, acme_project, settings=json.dumps({"jira": jira}))
    assert errors(response)["settings"] == [
        "settings.jira.token_env: 'GITHUB_TOKEN' is named by another organization's project: each organization needs "
        "a token variable of its own (ask the operator for one)"]
    own = {**jira, "token_env": "ACME_GITLAB_TOKEN"}
    assert save(boss, acme_project, token_env="ACME_GITLAB_TOKEN", settings=json.dumps({"jira": own})).status_code == 302

    Project.objects.filter(pk=acme_project.pk).update(settings={"jira": jira})  # stored before the rule
    with pytest.raises(DomainError, match="another organization's project") as refused:
        jira_settings(Project.objects.get(pk=acme_project.pk))
    assert "ghp-globex-value" not in str(refused.value)


def test_a_token_variable_the_operator_bound_to_an_organization_is_that_organizations_alone(
        acme_project, boss, lists, settings, monkeypatch):
    """AITEAM_TOKEN_ENVS "ACME_GITLAB_TOKEN=acme": no other organization may name it, in the field or its Jira
    settings, and one that named it first (or before the binding) neither takes it nor switches it off for acme."""
    settings.AITEAM_TOKEN_ENV_ORGANIZATIONS = {"ACME_GITLAB_TOKEN": "acme"}
    settings.AITEAM_JIRA_URLS = ["https://globex.atlassian.net"]
    monkeypatch.setenv("ACME_GITLAB_TOKEN", "glpat-acme-value")
    globex = ProjectFactory(organization=OrganizationFactory(slug="globex"), slug="default")
    gboss = MembershipFactory(organization=globex.organization, role="admin", user__username="gboss").user
    bound = "'ACME_GITLAB_TOKEN' is bound by the operator to another organization"
    assert errors(save(gboss, globex, token_env="ACME_GITLAB_TOKEN"))["token_env"][0].startswith(bound)
    jira = {"site_url": "https://globex.atlassian.net", "email": "bot@globex.test", "token_env": "ACME_GITLAB_TOKEN"}
    (error,) = errors(save(gboss, globex, settings=json.dumps({"jira": jira})))["settings"]
    assert error.startswith(f"settings.jira.token_env: {bound}")

    Project.objects.filter(pk=globex.pk).update(token_env="ACME_GITLAB_TOKEN", host_kind="gitlab",
                                                settings={"jira": jira})  # named before the binding
    assert save(boss, acme_project, token_env="ACME_GITLAB_TOKEN", host_kind="gitlab").status_code == 302
    assert host_auth(Project.objects.get(pk=acme_project.pk)).token == "glpat-acme-value"
    for use in (host_auth, jira_settings):
        with pytest.raises(DomainError, match=bound):
            use(Project.objects.get(pk=globex.pk))


def test_the_operators_bindings_are_read_from_the_environment_and_bad_ones_stop_the_start(tmp_path):
    def start(**env: str) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items() if not k.startswith("AITEAM_")}
        code = ("import django; django.setup(); from django.conf import settings as s; "
                "print(s.AITEAM_TOKEN_ENVS, s.AITEAM_TOKEN_ENV_ORGANIZATIONS, s.AITEAM_SSH_IDENTITIES)")
        return subprocess.run([sys.executable, "-c", code], env={**base, **env, "DJANGO_SETTINGS_MODULE": "aiteam.settings"},
                              capture_output=True, text=True, timeout=60)

    done = start(AITEAM_TOKEN_ENVS="GITHUB_TOKEN, ACME_TOKEN=acme",
                 AITEAM_SSH_IDENTITIES="acme=/etc/keys/acme,globex=/etc/keys/g")
    assert done.stdout.strip() == ("['GITHUB_TOKEN', 'ACME_TOKEN'] {'ACME_TOKEN': 'acme'} {'acme': PosixPath('/etc/keys/acme'), "
                                   "'globex': PosixPath('/etc/keys/g')}"), done.stderr
    for env, why in [({"AITEAM_SSH_IDENTITIES": "acme=/k,globex=/k"}, "/k is bound to more than one organization"),
                     ({"AITEAM_SSH_IDENTITIES": "acme"}, "'acme' is not KEY=VALUE"),
                     ({"AITEAM_SSH_IDENTITIES": "acme=keys/acme"}, "is not an absolute path"),
                     ({"AITEAM_SSH_IDENTITIES": "acme=/k,acme=/j"}, "'acme' is listed twice"),
                     ({"AITEAM_TOKEN_ENVS": "A=acme corp"}, "after '=' comes an organization's slug")]:
        failed = start(**env)
        assert failed.returncode != 0 and why in failed.stderr, (env, failed.stderr[-500:])


def test_delivery_reads_the_base_branch_and_token_variable_from_the_fields(alice, acme_project, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test-value")
    acme_project.base_branch, acme_project.token_env = "develop", "GITHUB_TOKEN"
    acme_project.settings = {"base_branch": "ignored", "github": {"repository": "acme/shop"}}
    acme_project.save()
    requirement = submit(alice)
    assert delivery_plan(requirement.pk).base == "develop"
    assert github_settings(acme_project) is None  # a plain git project opens no pull request, whatever its JSON says
    acme_project.host_kind = "github"
    github = github_settings(acme_project)
    assert github.repository == "acme/shop" and github.token == "ghp-test-value"


def test_the_migration_moves_the_json_keys_into_the_fields(acme):
    def project(slug: str, repo_url: str, data: dict) -> Project:
        return ProjectFactory(organization=acme, slug=slug, repo_url=repo_url, settings=data)

    hub = project("hub", "https://github.com/acme/hub.git",
                  {"base_branch": "trunk", "github": {"repository": "acme/hub", "api_url": "https://api.github.com"}})
    named = project("named", "", {"github": {"repository": "acme/named", "token_env": "ACME_TOKEN"}, "budgets": {}})
    lab = project("lab", "git@gitlab.com:acme/lab.git", {})
    plain = project("plain", "ssh://git@git.example.com/acme/plain.git", {"github": {"token_env": "UNUSED"}})
    moved.settings_to_fields(apps, SimpleNamespace(connection=connection))
    for row in (hub, named, lab, plain):
        row.refresh_from_db()
    assert (hub.base_branch, hub.host_kind, hub.token_env) == ("trunk", "github", "GITHUB_TOKEN")
    assert hub.settings == {"github": {"repository": "acme/hub", "api_url": "https://api.github.com"}}
    assert (named.host_kind, named.token_env, named.settings) == (
        "github", "ACME_TOKEN", {"github": {"repository": "acme/named"}, "budgets": {}})
    assert (lab.host_kind, lab.base_branch, lab.token_env) == ("gitlab", "main", "")
    assert (plain.host_kind, plain.token_env, plain.settings) == ("git", "", {"github": {}})
    moved.fields_to_settings(apps, SimpleNamespace(connection=connection))
    hub.refresh_from_db()
    assert hub.settings["base_branch"] == "trunk" and hub.settings["github"]["token_env"] == "GITHUB_TOKEN"


@pytest.mark.parametrize(("env", "expected"), [
    ({"AITEAM_GITHUB_TOKEN_ENVS": "OLD_TOKEN"}, ["OLD_TOKEN"]),
    ({"AITEAM_GITHUB_TOKEN_ENVS": "OLD_TOKEN", "AITEAM_TOKEN_ENVS": "NEW_A, NEW_B"}, ["NEW_A", "NEW_B"]),
    ({}, ["GITHUB_TOKEN", "GITLAB_TOKEN"]),
])
def test_the_older_allow_list_name_still_works_when_the_new_one_is_unset(env, expected):
    base = {k: v for k, v in os.environ.items() if k not in ("AITEAM_GITHUB_TOKEN_ENVS", "AITEAM_TOKEN_ENVS")}
    code = "import django; django.setup(); from django.conf import settings; print(','.join(settings.AITEAM_TOKEN_ENVS))"
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env, "DJANGO_SETTINGS_MODULE": "aiteam.settings"},
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip().split(",") == expected


def test_the_system_check_names_variables_the_operator_no_longer_allows(acme_project, lists, settings):
    Project.objects.filter(pk=acme_project.pk).update(token_env="GITHUB_TOKEN", gitlab_webhook_secret_env="ACME_HOOK_SECRET")
    assert not [w for w in run_checks(databases=["default"]) if w.id == "aiteam.W002"]
    settings.AITEAM_TOKEN_ENVS, settings.AITEAM_WEBHOOK_SECRET_ENVS = ["GITLAB_TOKEN"], []
    warnings = [w for w in run_checks(databases=["default"]) if w.id == "aiteam.W002"]
    assert [w.msg.split(": ", 1)[1] for w in warnings] == [
        "token_env 'GITHUB_TOKEN' is not on AITEAM_TOKEN_ENVS; it is refused until an admin of its organization changes it",
        "gitlab_webhook_secret_env 'ACME_HOOK_SECRET' is not on AITEAM_WEBHOOK_SECRET_ENVS; it is refused until an admin "
        "of its organization changes it"]
    assert not [w for w in run_checks() if w.id == "aiteam.W002"]  # without a database the check does not query
