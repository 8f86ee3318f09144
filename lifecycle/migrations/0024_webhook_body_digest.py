"""Webhook deliveries remember the digest of their signed body: the delivery id is not signed, so a captured body
replayed under a new id must be known by its content. Rows from before get a digest no body can have."""
import hashlib

from django.db import migrations, models


def mark_earlier_rows(apps, schema_editor):
    WebhookDelivery = apps.get_model("lifecycle", "WebhookDelivery")
    for row in WebhookDelivery.objects.only("pk"):
        row.body_sha256 = hashlib.sha256(f"before migration 0024: {row.pk}".encode()).hexdigest()
        row.save(update_fields=["body_sha256"])


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0023_requirement_tickets"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhookdelivery",
            name="body_sha256",
            field=models.CharField(default="", help_text="SHA-256 of the signed body: the delivery id is not signed, so "
                                   "a replayed body is known by this", max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(mark_earlier_rows, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="webhookdelivery",
            constraint=models.UniqueConstraint(fields=("project", "source", "body_sha256"), name="one_row_per_webhook_body"),
        ),
    ]
