"""ReviewTask: the one human-in-the-loop primitive. Any step may raise one.

Its FSM (open → claimed → resolved, open/claimed → escalated → resolved, expired) also has
self-loops for bookkeeping that must be audited like a transition: a reminder, an
assignment while escalated, a hand-over to a group. `target=None` keeps the state.
"""
import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django_fsm import FSMField, FSMModelMixin, transition

from lifecycle.querysets import ReviewTaskQuerySet
from lifecycle.states import NEVER_DECIDED_BY_SLA, PENDING_REVIEW_STATES, Decision, ReviewKind
from lifecycle.states import ReviewState as S

PENDING = Q(state__in=[s.value for s in PENDING_REVIEW_STATES])


class ReviewTask(FSMModelMixin, models.Model):
    class Via(models.TextChoices):
        API = "api"
        ADMIN = "admin"
        POLICY = "policy"
        CLI = "cli"  # the operator at a terminal (aiteam_demo --approve-deployment)
        SLACK = "slack"  # a button in a Slack thread, as the person the Slack user is mapped to
        ASSISTANT = "assistant"  # the assistant's request, pre-authorized for the project, run as the asker (ADR 36)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="review_tasks")
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="review_tasks")
    kind = models.CharField(max_length=40, choices=ReviewKind.choices)
    round = models.PositiveIntegerField(default=1, help_text="which round of this kind for the requirement")
    question = models.TextField()
    reasoning = models.TextField(blank=True)
    context = models.JSONField(default=dict, blank=True, help_text="pinned context shown to the reviewer")
    options = models.JSONField(default=list)
    resume_target = models.CharField(max_length=80, blank=True)
    state = FSMField(default=S.OPEN, choices=S.choices, protected=True)
    decision = models.CharField(max_length=20, choices=Decision.choices, blank=True)
    reason = models.TextField(blank=True)
    feedback = models.TextField(blank=True)
    decision_data = models.JSONField(default=dict, blank=True,
                                     help_text="structured input the decision carried, e.g. the new budget limits")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_policy = models.CharField(max_length=40, blank=True)
    decided_via = models.CharField(max_length=10, choices=Via.choices, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    sla_deadline = models.DateTimeField(help_text="the SLA: the task is overdue after this")
    escalation_policy = models.CharField(
        max_length=40, default="remind", help_text="what happens at the SLA: remind, reassign, escalate or auto_decide"
    )
    policy = models.JSONField(default=dict, blank=True, help_text="the SLA policy as resolved when the task opened")
    decide_by = models.DateTimeField(
        null=True, blank=True, help_text="the limit: the policy's stated default decision is applied then, except on a "
        "deployment approval, which the policy escalates then and leaves to a person"
    )
    next_sweep_at = models.DateTimeField(null=True, blank=True, help_text="when the SLA sweeper looks at it next")
    escalation_count = models.PositiveIntegerField(default=0, help_text="how many times the SLA policy acted")
    escalated_at = models.DateTimeField(null=True, blank=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_tasks"
    )
    assignee_group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ReviewTaskQuerySet.as_manager()

    class Meta:
        ordering = ["sla_deadline"]
        constraints = [
            models.UniqueConstraint(fields=["requirement", "kind", "round"], name="one_review_per_kind_round"),
        ]
        indexes = [
            models.Index(fields=["sla_deadline"], name="review_pending_sla", condition=PENDING),
            # The SLA sweeper's query, and only its rows: pending tasks ordered by when they are due.
            models.Index(fields=["next_sweep_at"], name="review_sweep_due", condition=PENDING),
            models.Index(fields=["organization", "state"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.round}: {self.requirement}"

    @property
    def is_pending(self) -> bool:
        return self.state in PENDING_REVIEW_STATES

    @property
    def policy_decides(self) -> bool:
        """Whether the SLA policy decides the task at `decide_by`; one it never decides is escalated then and waits."""
        return self.kind not in NEVER_DECIDED_BY_SLA

    @property
    def sent_back_text(self) -> str:
        """What a send-back tells the agents: the feedback (what to change) and the reason, whichever were typed, the
        decision's own first (the admin's page posts both boxes with either button)."""
        texts = (self.feedback, self.reason) if self.decision == Decision.REQUEST_CHANGES else (self.reason, self.feedback)
        return "\n\n".join(text for text in texts if text)

    @transition(state, source=S.OPEN, target=S.CLAIMED)
    @transition(state, source=S.ESCALATED, target=None)
    def claim(self) -> None: ...

    @transition(state, source=S.CLAIMED, target=S.OPEN)
    @transition(state, source=[S.OPEN, S.ESCALATED], target=None)
    def unclaim(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED], target=S.CLAIMED)
    @transition(state, source=S.ESCALATED, target=None)
    def assign(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED], target=S.OPEN)
    @transition(state, source=S.ESCALATED, target=None)
    def hand_to_group(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED, S.ESCALATED], target=None)
    def remind(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED], target=S.ESCALATED)
    def escalate(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED, S.ESCALATED], target=S.RESOLVED)
    def resolve(self) -> None: ...

    @transition(state, source=[S.OPEN, S.CLAIMED, S.ESCALATED], target=S.EXPIRED)
    def expire(self) -> None: ...
