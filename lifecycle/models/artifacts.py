"""Artifacts: typed, versioned, content-hashed. The payload lives out of line in ArtifactBlob."""
import uuid

from django.db import models

from lifecycle.states import ArtifactKind


class ArtifactBlob(models.Model):
    """Content-addressed payload: one row per distinct content, shared by equal artifacts."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    content = models.TextField()
    size = models.PositiveIntegerField()


class Artifact(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=40, choices=ArtifactKind.choices)
    name = models.CharField(max_length=300)
    version = models.PositiveIntegerField()
    blob = models.ForeignKey(ArtifactBlob, on_delete=models.PROTECT, related_name="+")
    summary = models.CharField(max_length=500, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    approved = models.BooleanField(default=False)
    created_by_role = models.CharField(max_length=40, blank=True)
    step = models.ForeignKey("lifecycle.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="artifacts")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["requirement", "kind", "name", "version"], name="one_artifact_version"),
        ]

    @property
    def content_hash(self) -> str:
        return self.blob_id

    def __str__(self) -> str:
        return f"{self.kind}:{self.name} v{self.version}"
