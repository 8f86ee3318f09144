"""How a person hears of conversations by e-mail (issue 24): an e-mail per new system conversation, a daily
digest of their unread messages, or none. A person without a row gets the e-mail at once."""
from django.conf import settings
from django.db import models


class ConversationEmail(models.Model):
    class Delivery(models.TextChoices):
        IMMEDIATELY = "immediately", "an e-mail for each conversation the team starts"
        DAILY_DIGEST = "daily_digest", "one daily digest of my unread conversation messages"
        OFF = "off", "no e-mail (the web's unread count only)"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversation_email")
    delivery = models.CharField(max_length=20, choices=Delivery.choices, default=Delivery.IMMEDIATELY)
    digest_through = models.DateTimeField(null=True, blank=True,
                                          help_text="the last digest covered messages written up to then")

    class Meta:
        verbose_name = "conversation e-mail setting"

    def __str__(self) -> str:
        return f"{self.user}: {self.get_delivery_display()}"
