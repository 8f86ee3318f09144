"""Audit rows for every state change, and the transactional outbox."""
from django.conf import settings
from django.db import models
from django.db.models import Q

# The events whose relay queues notifications (lifecycle/notifications/handlers.py's NOTIFIERS)
NOTIFYING_EVENTS = ("ReviewTaskOpened", "ReviewTaskReminded", "ReviewTaskEscalated", "ReviewTaskAssigned",
                    "ReviewTaskDecidedByPolicy", "PromotionProposed")


class StateTransition(models.Model):
    """One row per transition of a requirement, a story or a review task."""

    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="transitions")
    subject = models.CharField(max_length=20, default="requirement")
    subject_id = models.CharField(max_length=40)
    event = models.CharField(max_length=60)
    from_state = models.CharField(max_length=40)
    to_state = models.CharField(max_length=40)
    actor_role = models.CharField(max_length=40, blank=True, help_text="agent role or policy that acted")
    # indexed only where set (transition_by_user): most transitions are an agent's or a policy's
    actor_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   db_index=False)
    via = models.CharField(max_length=20, blank=True)
    guard = models.CharField(max_length=300, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["actor_user"], name="transition_by_user", condition=Q(actor_user__isnull=False))]

    def __str__(self) -> str:
        return f"{self.subject} {self.event}: {self.from_state} → {self.to_state}"


class OutboxEvent(models.Model):
    """A domain event, written in the transaction of the change it reports; relayed at least once."""

    requirement = models.ForeignKey(
        "lifecycle.Requirement", null=True, on_delete=models.CASCADE, related_name="events"
    )
    name = models.CharField(max_length=60)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    relay_attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # when notify_for_event worked out its notifications (lifecycle/notifications); NULL on a relayed event that
    # notifies people: its notifications were never worked out (lost on the way), and the beat queues it again
    notified_at = models.DateTimeField(null=True, blank=True)
    # the beat queues such an event again no earlier than this (spaced by the event's age; NULL: never queued again)
    notify_requeue_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["id"], name="outbox_unsent", condition=Q(sent_at=None)),
                   models.Index(fields=["sent_at"], name="outbox_unnotified",
                                condition=Q(notified_at=None, sent_at__isnull=False, name__in=NOTIFYING_EVENTS))]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"
