"""FailureRoute: where one failure was sent, and why (the classifier's full trace).

Written in the same transaction as the action the route causes (a retry, a fix attempt, an
architect revision, a review task), so a route on record always happened and vice versa.
"""
from django.db import models

from lifecycle.failure_rules import Route, Source


class FailureRoute(models.Model):
    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="+")
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="failure_routes")
    step = models.ForeignKey("lifecycle.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    source = models.CharField(max_length=20, choices=[(s.value, s.value) for s in Source])
    summary = models.CharField(max_length=500)
    signature = models.CharField(max_length=64, blank=True, help_text="same facts, same signature")
    route = models.CharField(max_length=20, choices=[(r.value, r.value) for r in Route])
    rule = models.CharField(max_length=60, help_text="the first rule that matched")
    matched = models.JSONField(default=list, help_text="every rule that matched, in order")
    trace = models.JSONField(default=list, help_text="every rule evaluated: rule, route, matched, because")
    facts = models.JSONField(default=dict, help_text="the failure as classified")
    action = models.CharField(max_length=300, help_text="what the route made happen")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["requirement", "source", "-id"], name="failure_route_latest")]

    def __str__(self) -> str:
        return f"{self.source} → {self.route} ({self.rule})"
