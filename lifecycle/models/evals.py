"""Evaluation runs (docs/evals.md): a suite's cases run through the whole team, each case's outcome and measures."""
from typing import Any
from uuid import UUID

from django.db import models

EVALUATION_ORGANIZATION = "eval"  # the organization operators' evaluation projects are made in (its slug)


def evaluation_organization_slug(organization_id: Any = None) -> str:
    """The organization a run's evaluation projects are made in: the operators' shared one, or, for a run of one
    organization's versions, an organization of its own that no person belongs to (a '.' no real slug holds)."""
    return EVALUATION_ORGANIZATION if organization_id is None else f"{EVALUATION_ORGANIZATION}.{UUID(str(organization_id)).hex}"


def is_evaluation_organization(slug: str) -> bool:
    return slug == EVALUATION_ORGANIZATION or slug.startswith(f"{EVALUATION_ORGANIZATION}.")


class EvalOutcome(models.TextChoices):
    DEPLOYED = "deployed"
    ESCALATED = "escalated"
    CANCELLED = "cancelled"
    FAILED = "failed"  # a step failed for a person, the run stopped short of a decision, or the case broke


class HiddenResult(models.TextChoices):
    FULL = "full"
    PARTIAL = "partial"
    NONE = "none"  # no hidden test passed, or their report is not believed (hidden_error says why)
    NOT_RUN = "not_run"  # nothing delivered, or the case has no hidden tests
    ERROR = "error"  # the hidden tests broke after the case ran (hidden_error says why)


class EvalRun(models.Model):
    suite = models.CharField(max_length=500, help_text=(
        "the suite's folder name under evals/, or the resolved path of a suite outside it"))
    bundle = models.ForeignKey("lifecycle.PromptBundle", null=True, blank=True, on_delete=models.PROTECT,
                               related_name="eval_runs", help_text="the prompt bundle every case ran with")
    settings = models.JSONField(default=dict, blank=True, help_text=(
        "the budget profile and playbook table every case's project ran with (empty: the defaults)"))
    live = models.BooleanField(default=False, help_text="against the configured model; otherwise each case's cassette")
    organization = models.ForeignKey(
        "lifecycle.Organization", null=True, blank=True, on_delete=models.CASCADE, related_name="eval_runs",
        help_text="whose versions the run measured, readable by its members only (its cases ran in an evaluation "
                  "organization of its own); empty: an operator's run, in the shared evaluation organization")
    provider = models.CharField(max_length=40)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"eval {self.pk} ({self.suite})"


class EvalCase(models.Model):
    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10)  # brief or ticket
    requirement = models.ForeignKey("lifecycle.Requirement", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="eval_cases")
    outcome = models.CharField(max_length=10, choices=EvalOutcome.choices)
    state = models.CharField(max_length=30, blank=True, help_text="the requirement's state when the case ended")
    hidden = models.CharField(max_length=10, choices=HiddenResult.choices, default=HiddenResult.NOT_RUN)
    hidden_passed = models.PositiveIntegerField(default=0)
    hidden_total = models.PositiveIntegerField(default=0)
    quality_gate_passed = models.BooleanField(null=True, help_text="QC's last verdict; null when QC never judged")
    gate_false_pass = models.BooleanField(default=False,
                                          help_text="the quality gate passed and the hidden tests did not all pass")
    attempts = models.JSONField(default=dict, help_text="role → steps run (one per attempt) and runs")
    loops = models.JSONField(default=dict, help_text="story, design and code review rounds, fixes, QC rounds")
    gates = models.JSONField(default=list, help_text="each gate's verdict: reviews, QC, decisions")
    llm_calls = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cache_creation_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    wall_s = models.FloatField(default=0.0, help_text="submission to the case's end, hidden tests excluded")
    critical_path_s = models.FloatField(default=0.0, help_text="step time along the longest dependency chain")
    error = models.TextField(blank=True)
    hidden_error = models.TextField(blank=True, help_text=(
        "why the hidden tests judged nothing: their report not believed (scored none) or their run broke (error)"))

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="one_eval_case_per_name")]

    def __str__(self) -> str:
        return f"{self.name}: {self.outcome}"

    @property
    def broke(self) -> bool:
        """The machinery failed, not the team: the case or its hidden tests broke (nothing to compare it by)."""
        return bool(self.error) or self.hidden == HiddenResult.ERROR
