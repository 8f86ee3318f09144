"""Tenancy: every domain row is reachable from exactly one Organization."""
import uuid

from django.conf import settings
from django.db import models

from lifecycle import repo_settings as repo
from lifecycle.states import Role


class Organization(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "organization"], name="one_membership_per_org")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.organization} ({self.role})"


class Project(models.Model):
    """A target git repository with its own settings (quality gates, budgets, models)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100)
    repo_url = models.CharField(max_length=500, blank=True)
    base_branch = models.CharField(max_length=200, default="main", validators=[repo.validate_branch_name],
                                   help_text="the branch work starts from and pull requests go to")
    host_kind = models.CharField(max_length=10, choices=repo.HostKind.choices, default=repo.HostKind.GIT,
                                 help_text="what serves repo_url: GitHub and GitLab also take issues and pull requests")
    token_env = models.CharField(max_length=100, blank=True, validators=[repo.validate_token_env],
                                 help_text="the environment variable holding the host token (one the operator "
                                           "lists in AITEAM_TOKEN_ENVS); empty: no token")
    webhook_label = models.CharField(max_length=100, default="aiteam", validators=[repo.validate_label],
                                     help_text="the issue label that starts a run when a webhook reports it added")
    github_webhook_secret_env = models.CharField(
        max_length=100, blank=True, validators=[repo.validate_webhook_secret_env],
        help_text="the environment variable holding the GitHub webhook's secret (AITEAM_WEBHOOK_SECRET_ENVS); "
                  "empty: GitHub webhooks off")
    gitlab_webhook_secret_env = models.CharField(
        max_length=100, blank=True, validators=[repo.validate_webhook_secret_env],
        help_text="the environment variable holding the GitLab webhook's token; empty: GitLab webhooks off")
    jira_webhook_secret_env = models.CharField(
        max_length=100, blank=True, validators=[repo.validate_webhook_secret_env],
        help_text="the environment variable holding the Jira webhook's secret; empty: Jira webhooks off")
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="project_slug_per_org")]

    def __str__(self) -> str:
        return f"{self.organization.slug}/{self.slug}"

    def webhook_secret_env(self, source: str) -> str:
        """The variable holding the secret of `source`'s webhook (github, gitlab, jira); "" when it is off."""
        return getattr(self, f"{source}_webhook_secret_env", "") if source in WEBHOOK_SOURCES else ""


WEBHOOK_SOURCES = ("github", "gitlab", "jira")
