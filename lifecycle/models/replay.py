"""Replay: a finished or failed run re-run from its recordings, and how the re-run compared."""
from django.conf import settings
from django.db import models


class Replay(models.Model):
    """One replay run. Its requirement is a new Requirement (`replay_of` names the source), so the
    source's record stays intact; the comparison is refreshed whenever the replay comes to rest."""

    class Verdict(models.TextChoices):
        RUNNING = "running"
        MATCHED = "matched"
        DIFFERS = "differs"

    requirement = models.OneToOneField("lifecycle.Requirement", on_delete=models.CASCADE, related_name="replay_run")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    via = models.CharField(max_length=20, help_text="cli, admin or api")
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.RUNNING)
    comparison = models.JSONField(default=dict, blank=True,
                                  help_text="transition sequences and artifact hashes, source vs replay, and what differs")
    created_at = models.DateTimeField(auto_now_add=True)
    compared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"replay {self.requirement_id} ({self.verdict})"
