"""A project's repository connection as typed fields: base branch, host kind, token variable, webhook settings.

The base branch and the GitHub token variable were keys of Project.settings ("base_branch", "github.token_env");
they move to their fields and leave the JSON, so that delivery reads them from one place. A project whose GitHub
settings name a repository becomes host kind github and keeps its token variable (GITHUB_TOKEN when it named
none, as delivery assumed); any other project's kind is guessed from its repo_url's host.
"""
from django.db import migrations, models

import lifecycle.repo_settings


def settings_to_fields(apps, schema_editor):
    Project = apps.get_model("lifecycle", "Project")
    for project in Project.objects.using(schema_editor.connection.alias).iterator():
        data = dict(project.settings or {}) if isinstance(project.settings, dict) else {}
        github = dict(data.get("github") or {}) if isinstance(data.get("github"), dict) else {}
        project.base_branch = str(data.pop("base_branch", "") or "main")
        token_env = github.pop("token_env", "")
        if github.get("repository"):
            project.host_kind, project.token_env = "github", str(token_env or "GITHUB_TOKEN")
        else:
            project.host_kind = lifecycle.repo_settings.host_kind_of(project.repo_url)
        if "github" in data:
            data["github"] = github
        project.settings = data
        project.save(update_fields=["base_branch", "host_kind", "token_env", "settings"])


def fields_to_settings(apps, schema_editor):
    Project = apps.get_model("lifecycle", "Project")
    for project in Project.objects.using(schema_editor.connection.alias).iterator():
        data = dict(project.settings or {})
        if project.base_branch != "main":
            data["base_branch"] = project.base_branch
        if project.host_kind == "github" and project.token_env:
            data["github"] = {**(data.get("github") or {}), "token_env": project.token_env}
        project.settings = data
        project.save(update_fields=["settings"])


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0021_autonomous_deployments'),
    ]

    operations = [
        migrations.AddField(
            model_name='project',
            name='base_branch',
            field=models.CharField(default='main', help_text='the branch work starts from and pull requests go to', max_length=200, validators=[lifecycle.repo_settings.validate_branch_name]),
        ),
        migrations.AddField(
            model_name='project',
            name='github_webhook_secret_env',
            field=models.CharField(blank=True, help_text="the environment variable holding the GitHub webhook's secret (AITEAM_WEBHOOK_SECRET_ENVS); empty: GitHub webhooks off", max_length=100, validators=[lifecycle.repo_settings.validate_webhook_secret_env]),
        ),
        migrations.AddField(
            model_name='project',
            name='gitlab_webhook_secret_env',
            field=models.CharField(blank=True, help_text="the environment variable holding the GitLab webhook's token; empty: GitLab webhooks off", max_length=100, validators=[lifecycle.repo_settings.validate_webhook_secret_env]),
        ),
        migrations.AddField(
            model_name='project',
            name='host_kind',
            field=models.CharField(choices=[('git', 'plain git'), ('github', 'GitHub'), ('gitlab', 'GitLab')], default='git', help_text='what serves repo_url: GitHub and GitLab also take issues and pull requests', max_length=10),
        ),
        migrations.AddField(
            model_name='project',
            name='jira_webhook_secret_env',
            field=models.CharField(blank=True, help_text="the environment variable holding the Jira webhook's secret; empty: Jira webhooks off", max_length=100, validators=[lifecycle.repo_settings.validate_webhook_secret_env]),
        ),
        migrations.AddField(
            model_name='project',
            name='token_env',
            field=models.CharField(blank=True, help_text='the environment variable holding the host token (one the operator lists in AITEAM_TOKEN_ENVS); empty: no token', max_length=100, validators=[lifecycle.repo_settings.validate_token_env]),
        ),
        migrations.AddField(
            model_name='project',
            name='webhook_label',
            field=models.CharField(default='aiteam', help_text='the issue label that starts a run when a webhook reports it added', max_length=100, validators=[lifecycle.repo_settings.validate_label]),
        ),
        migrations.RunPython(settings_to_fields, fields_to_settings),
    ]
