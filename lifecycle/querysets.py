"""Reusable filters."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from lifecycle.states import DECIDING_ROLES, PENDING_REVIEW_STATES, ReviewState


class ReviewTaskQuerySet(models.QuerySet):
    def pending(self) -> ReviewTaskQuerySet:
        return self.filter(state__in=PENDING_REVIEW_STATES)

    def of_real_runs(self) -> ReviewTaskQuerySet:
        """Without a replay's gates: decided as recorded, or held open as a record (lifecycle/replay/runs.py `_hold`),
        never anyone's work; they stay on the replay's own requirement page."""
        return self.filter(requirement__replay_of=None)

    def overdue(self, now) -> ReviewTaskQuerySet:
        """Past the SLA and still waiting (partial index review_pending_sla)."""
        return self.pending().filter(sla_deadline__lt=now)

    def due_for_sweep(self, now) -> ReviewTaskQuerySet:
        """What the SLA sweeper must act on now (partial index review_sweep_due)."""
        return self.pending().filter(next_sweep_at__lte=now)

    def escalated(self) -> ReviewTaskQuerySet:
        return self.filter(state=ReviewState.ESCALATED)

    def assigned_to(self, user) -> ReviewTaskQuerySet:
        return self.filter(assignee=user)

    def unassigned(self) -> ReviewTaskQuerySet:
        return self.filter(assignee=None, assignee_group=None)

    def for_groups_of(self, user) -> ReviewTaskQuerySet:
        return self.filter(Q(assignee=None) & Q(assignee_group__in=user.groups.all()))

    def decidable_by(self, user) -> ReviewTaskQuerySet:
        return self.filter(organization__memberships__user=user, organization__memberships__role__in=DECIDING_ROLES)
