"""Tenancy: every domain row is reachable from exactly one Organization."""
import uuid

from django.conf import settings
from django.db import models

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
    settings = models.JSONField(default=dict, blank=True)
    autonomous_deployments = models.BooleanField(
        default=False, help_text="autonomous mode (AITEAM_AUTONOMOUS) may approve this project's deployments; never "
        "one whose change adds or edits a CI workflow or uses secrets. in one: that waits for a person (ADR 27)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="project_slug_per_org")]

    def __str__(self) -> str:
        return f"{self.organization.slug}/{self.slug}"
