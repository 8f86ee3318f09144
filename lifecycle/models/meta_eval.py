"""MetaEvalLog: how well the team's own machinery judges, written as runs happen (docs/meta-eval.md, ADR 40).

Append-only: an entry is a measurement taken when its fact happened (a failure came back after its fix, a human
approved what a gate refused, a requirement ended within its budget). Editing or deleting one would rewrite the
history the trends are drawn from, so the model refuses both, its querysets refuse bulk update and delete, and the
admin is read-only. A tenant's deletion still takes its entries (organization: CASCADE, done in SQL by the
collector); a deleted requirement or project leaves its entries, unlinked (SET_NULL).
"""
from django.db import models
from django.db.models import Q
from django.utils import timezone


class AppendOnlyError(RuntimeError):
    """An attempt to change or delete a MetaEvalLog entry."""


class MetaKind(models.TextChoices):
    ROUTE = "route"  # a routed failure, judged: did the same failure come back after the fix?
    BUDGET_USE = "budget_use"  # at a requirement's end: spend against allocation, per role
    GATE_SIGNAL = "gate_signal"  # a gate's verdict contradicted: by hidden tests, a later gate or a human override
    LOOPS = "loops"  # at a requirement's end: the loops each role went round
    PROMOTION = "promotion"  # a proposed change to the team's artifacts: accepted, modified, rejected, rolled back


class MetaEvalQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("MetaEvalLog is append-only: entries are never updated")

    def delete(self):
        raise AppendOnlyError("MetaEvalLog is append-only: entries are never deleted")


class MetaEvalLog(models.Model):
    kind = models.CharField(max_length=20, choices=MetaKind.choices)
    organization = models.ForeignKey("lifecycle.Organization", null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="+", help_text="null: not one tenant's (e.g. a shared artifact)")
    project = models.ForeignKey("lifecycle.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requirement = models.ForeignKey("lifecycle.Requirement", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    role = models.CharField(max_length=40, blank=True, help_text="the role measured: routed to, budgeted, …")
    playbook = models.CharField(max_length=40, blank=True)
    data = models.JSONField(default=dict, help_text="the measure (docs/meta-eval.md)")
    # What makes an entry once-only (e.g. "loops:r<id>"): a retried event or hook writes nothing the second time.
    key = models.CharField(max_length=120, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = MetaEvalQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["kind", "created_at"], name="meta_eval_kind_time"),
                   models.Index(fields=["organization", "kind", "created_at"], name="meta_eval_org_kind_time",
                                condition=Q(organization__isnull=False))]
        verbose_name = "meta-evaluation entry"
        verbose_name_plural = "meta-evaluation log"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("MetaEvalLog is append-only: an entry is never changed once written")
        kwargs["force_insert"] = True  # a new object carrying an existing id must not update that row
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("MetaEvalLog is append-only: an entry is never deleted")

    def __str__(self) -> str:
        return f"{self.kind} {self.role or ''} {self.created_at:%Y-%m-%d}".strip()
