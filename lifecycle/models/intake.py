"""The Idempotency-Key of a POST /api/v1/requirements/ and the answer its submission got (lifecycle/services/intake.py)."""
from django.conf import settings
from django.db import models


class IdempotencyKey(models.Model):
    """One per (user, key), written in the transaction of the submission it answered: a repeat of the key gets that
    answer again, the requirement made (201) or the ticket's live one found (200), whatever happened to it since."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    submission_sha256 = models.CharField(max_length=64, help_text="the submission as stored, digested: the key sent "
                                                                  "again with another one is refused (422)")
    requirement = models.ForeignKey("lifecycle.Requirement", null=True, on_delete=models.CASCADE,
                                    related_name="idempotency_keys",
                                    help_text="the answer (null only inside the transaction that writes the row)")
    live = models.BooleanField(default=False, help_text="the ticket's live requirement was found (200), not made")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="one_answer_per_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.key}"
