"""Promotions (ADR 39): the only way a project's prompt bundle, budget profile or playbook table changes. Each change
is a decision row: the structured change, the evaluation runs that justify it, who proposed it and what its owner
decided. A rollback is a decision too, so the rows are the whole history of what was current when."""
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class PromotedArtifact(models.TextChoices):
    """What a promotion changes, and the project setting that holds its current version."""

    PROMPTS = "prompts", "prompt bundle"
    BUDGETS = "budgets", "budget profile"
    PLAYBOOKS = "playbooks", "playbook table"


class PromotionDecision(models.Model):
    class Kind(models.TextChoices):
        PROMOTION = "promotion"
        ROLLBACK = "rollback"  # an owner restored an earlier version: decided as it is made

    class State(models.TextChoices):
        PROPOSED = "proposed"
        ACCEPTED = "accepted"
        MODIFIED = "modified"  # accepted with the owner's own changes to the candidate
        REJECTED = "rejected"
        SUPERSEDED = "superseded"  # another version became current first: propose again against it

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("lifecycle.Project", on_delete=models.CASCADE, related_name="promotions")
    artifact = models.CharField(max_length=20, choices=PromotedArtifact.choices)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PROMOTION)
    state = models.CharField(max_length=12, choices=State.choices, default=State.PROPOSED)
    current = models.JSONField(help_text="the version current when this was proposed (what a rollback restores)")
    current_version = models.CharField(max_length=64, help_text="its content hash (a prompt bundle's sha256)")
    candidate = models.JSONField(help_text="the version proposed")
    candidate_version = models.CharField(max_length=64)
    change = models.JSONField(help_text="current → candidate: per prompt file a unified diff; per value its path, "
                                        "from and to")
    adopted = models.JSONField(null=True, blank=True, help_text="what became current: the candidate, or the owner's "
                                                                "modification of it")
    adopted_version = models.CharField(max_length=64, blank=True)
    adopted_change = models.JSONField(null=True, blank=True, help_text="candidate → adopted, when modified")
    current_run = models.ForeignKey("lifecycle.EvalRun", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+", help_text="the suite run with the current version")
    candidate_run = models.ForeignKey("lifecycle.EvalRun", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="+", help_text="the same suite run with the candidate")
    expected_effect = models.TextField(blank=True)
    justification = models.TextField(blank=True, help_text="why, in the proposer's words (the runs are the evidence)")
    proposer = models.CharField(max_length=20, help_text='"person" or "optimizer"')
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    rollback_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.RESTRICT, related_name="+",
                                    help_text="a rollback: the decision whose version it undid")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decided_via = models.CharField(max_length=10, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "artifact", "state"])]
        constraints = [
            models.CheckConstraint(name="promotion_rollback_names_its_decision",
                                   condition=Q(kind="promotion") | Q(rollback_of__isnull=False)),
            # one open proposal per candidate, measured against one current version (the 409 of a second one)
            models.UniqueConstraint(fields=["project", "artifact", "candidate_version", "current_version"],
                                    condition=Q(state="proposed"), name="promotion_one_open_per_candidate"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of {self.get_artifact_display()} for {self.project_id}: {self.state}"

    @property
    def is_open(self) -> bool:
        return self.state == self.State.PROPOSED

    @property
    def proposer_name(self) -> str:
        """Who proposed it, as people read it: their user name, the optimizer, or a deleted user's placeholder."""
        if self.proposed_by is not None:
            return self.proposed_by.get_username()
        return "the optimizer" if self.proposer == "optimizer" else "a deleted user"
