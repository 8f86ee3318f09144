"""Prompt bundles: every prompt a requirement's agents use, frozen by content hash when it starts."""
from django.db import models


class PromptBundle(models.Model):
    sha256 = models.CharField(max_length=64, primary_key=True)
    prompts = models.JSONField(help_text="prompt name → text, project overrides applied")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.sha256[:12]
