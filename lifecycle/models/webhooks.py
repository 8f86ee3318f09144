"""Webhook deliveries that started (or found) a run: a repeated delivery id is recognised and does nothing."""
from django.db import models

from lifecycle.models.tenancy import WEBHOOK_SOURCES


class WebhookDelivery(models.Model):
    """One per (project, source, delivery id), written in the transaction that makes or finds the requirement.
    Ignored events are answered and not recorded: repeating one is ignored again."""

    project = models.ForeignKey("lifecycle.Project", on_delete=models.CASCADE, related_name="webhook_deliveries")
    source = models.CharField(max_length=10, choices=[(source, source) for source in WEBHOOK_SOURCES])
    delivery_id = models.CharField(max_length=200, help_text="X-GitHub-Delivery, GitLab's Idempotency-Key or event "
                                                             "UUID, X-Atlassian-Webhook-Identifier")
    body_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the signed body: the delivery id is not "
                                                            "signed, so a replayed body is known by this")
    event = models.CharField(max_length=100, help_text="what it reported, e.g. issues.labeled")
    requirement = models.ForeignKey("lifecycle.Requirement", null=True, on_delete=models.SET_NULL,
                                    related_name="webhook_deliveries")
    started_run = models.BooleanField(help_text="false: the ticket already had a live requirement")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        constraints = [models.UniqueConstraint(fields=["project", "source", "delivery_id"],
                                               name="one_row_per_webhook_delivery"),
                       models.UniqueConstraint(fields=["project", "source", "body_sha256"],
                                               name="one_row_per_webhook_body")]

    def __str__(self) -> str:
        return f"{self.source} {self.delivery_id}"
