"""Store an artifact: content-addressed blob out of line, a small versioned row in line."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from lifecycle.models import Artifact, ArtifactBlob, Requirement, Step


def artifact_store(
    requirement: Requirement, *, kind: str, name: str, content: str | dict | list, summary: str = "",
    metadata: dict[str, Any] | None = None, step: Step | None = None, role: str = "", approved: bool = False,
) -> Artifact:
    """A new version of (kind, name) for the requirement; equal contents share one blob."""
    text = content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()
    blob, _ = ArtifactBlob.objects.get_or_create(sha256=digest, defaults={"content": text, "size": len(text.encode())})
    version = requirement.artifacts.filter(kind=kind, name=name).count() + 1
    return Artifact.objects.create(
        requirement=requirement, kind=kind, name=name, version=version, blob=blob, summary=summary[:500],
        metadata=metadata or {}, step=step, created_by_role=role, approved=approved,
    )


def latest(requirement: Requirement, kind: str, name: str | None = None) -> Artifact | None:
    rows = requirement.artifacts.filter(kind=kind)
    if name is not None:
        rows = rows.filter(name=name)
    return rows.select_related("blob").order_by("-created_at", "-version").first()


def content_json(artifact: Artifact) -> Any:
    return json.loads(artifact.blob.content)
