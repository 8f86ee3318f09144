"""Reusable filters."""
from __future__ import annotations

from django.db import models

from lifecycle.states import DECIDING_ROLES, PENDING_REVIEW_STATES


class ReviewTaskQuerySet(models.QuerySet):
    def pending(self) -> ReviewTaskQuerySet:
        return self.filter(state__in=PENDING_REVIEW_STATES)

    def overdue(self, now) -> ReviewTaskQuerySet:
        return self.pending().filter(sla_deadline__lt=now)

    def decidable_by(self, user) -> ReviewTaskQuerySet:
        return self.filter(organization__memberships__user=user, organization__memberships__role__in=DECIDING_ROLES)
