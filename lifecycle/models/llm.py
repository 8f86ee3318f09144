"""Every model call, recorded: the audit trail, the cost ledger and the source for replay."""
from django.db import models


class LLMCall(models.Model):
    requirement = models.ForeignKey(
        "lifecycle.Requirement", null=True, blank=True, on_delete=models.CASCADE, related_name="llm_calls"
    )
    step = models.ForeignKey("lifecycle.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls")
    # an assistant's call (ADR 36): the answer it was made for; such calls count against no requirement's budget
    message = models.ForeignKey("lifecycle.Message", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="llm_calls")
    role = models.CharField(max_length=40)
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    system_sha256 = models.CharField(max_length=64)
    system = models.TextField()
    messages = models.JSONField(default=list)
    tool_name = models.CharField(max_length=100)
    params = models.JSONField(default=dict)
    response = models.JSONField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cache_creation_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    error = models.TextField(blank=True)
    context_sources = models.JSONField(default=list, blank=True, help_text=(
        "on an existing repository: the files and symbols the request carried, each with why it was chosen"))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.role} {self.model} ({self.input_tokens}+{self.output_tokens} tok)"
