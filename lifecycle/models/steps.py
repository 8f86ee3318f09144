"""Step: one agent step of one requirement, with a lease and a fencing token.

(requirement, key, attempt) is unique, so scheduling the same step twice is harmless.
`fence` grows on every claim; a worker's write is accepted only with the current fence.
"""
from django.db import models
from django.db.models import Q

from lifecycle.states import StepState


class Step(models.Model):
    # no index of its own: one_step_per_attempt's index leads with requirement_id (one index entry less to write
    # on every step's insert and on every update that moves it between states)
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="steps",
                                    db_index=False)
    key = models.CharField(max_length=60)
    attempt = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=10, choices=StepState.choices, default=StepState.QUEUED)
    fence = models.PositiveIntegerField(default=0)
    runs = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["requirement", "key", "attempt"], name="one_step_per_attempt")]
        indexes = [
            models.Index(
                fields=["state", "lease_expires_at", "enqueued_at"], name="step_unfinished",
                condition=Q(state__in=[StepState.QUEUED, StepState.RUNNING]),
            )
        ]

    def __str__(self) -> str:
        return f"{self.key}#{self.attempt} ({self.state})"
