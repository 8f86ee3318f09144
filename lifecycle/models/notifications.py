"""One message to one recipient over one channel: the record of its sending, the retry state and the dedupe key.

Webhook URLs are secrets (a Slack URL is its own credential): the row names the channel,
the URL is looked up from settings when sending and never stored here.
"""
from django.db import models
from django.db.models import Q


class Notification(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    key = models.CharField(max_length=255, unique=True, help_text="event + channel + recipient: relaying twice sends once")
    event = models.CharField(max_length=40)
    channel = models.CharField(max_length=20)
    recipient = models.CharField(max_length=254, blank=True, help_text="an e-mail address; blank for a webhook")
    requirement = models.ForeignKey(
        "lifecycle.Requirement", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    review_task = models.ForeignKey(
        "lifecycle.ReviewTask", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    project = models.ForeignKey(
        "lifecycle.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="for a notification about a project, not a requirement (a promotion to decide): whose webhook",
    )
    subject = models.CharField(max_length=300)
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # the beat's re-queue of a due row waits until then (spaced by how long the row has been due: a row stuck behind
    # a long queue gets a few extra messages, not one a minute)
    requeue_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="notification_due", condition=Q(state="pending")),
        ]

    def __str__(self) -> str:
        return f"{self.event} via {self.channel} to {self.recipient or 'webhook'} ({self.state})"
