"""Store an artifact: content-addressed blob out of line, a small versioned row in line."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from lifecycle.models import Artifact, ArtifactBlob, Requirement, Step


@dataclass(frozen=True)
class NewArtifact:
    """One artifact to store: artifact_store's arguments, for artifacts_store."""

    kind: str
    name: str
    content: str | dict | list
    summary: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    step: Step | None = None
    role: str = ""
    approved: bool = False


def artifact_store(
    requirement: Requirement, *, kind: str, name: str, content: str | dict | list, summary: str = "",
    metadata: dict[str, Any] | None = None, step: Step | None = None, role: str = "", approved: bool = False,
) -> Artifact:
    """A new version of (kind, name) for the requirement; equal contents share one blob."""
    return artifacts_store(requirement, [NewArtifact(kind, name, content, summary, metadata or {}, step, role,
                                                     approved)])[0]


def artifacts_store(requirement: Requirement, new: list[NewArtifact]) -> list[Artifact]:
    """A new version of each (kind, name), in the order given, in three statements however many there are: the
    blobs not stored yet, the versions so far, the rows. The caller holds the requirement's lock."""
    if not new:
        return []
    texts = [item.content if isinstance(item.content, str) else json.dumps(
        item.content, indent=2, ensure_ascii=False, sort_keys=True) for item in new]
    digests = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
    blobs = {digest: ArtifactBlob(sha256=digest, content=text, size=len(text.encode()))
             for digest, text in zip(digests, texts, strict=True)}
    # Equal contents share the stored one. In hash order: two applies inserting the same blobs in opposite orders
    # would each wait for the other's uncommitted row (a deadlock on PostgreSQL).
    ArtifactBlob.objects.bulk_create(sorted(blobs.values(), key=lambda blob: blob.sha256), ignore_conflicts=True)
    versions = dict(((kind, name), n) for kind, name, n in requirement.artifacts.filter(
        kind__in={i.kind for i in new}, name__in={i.name for i in new}).order_by().values_list(
        "kind", "name").annotate(n=Count("id")))
    rows = []
    for item, digest in zip(new, digests, strict=True):
        version = versions[item.kind, item.name] = versions.get((item.kind, item.name), 0) + 1
        rows.append(Artifact(requirement=requirement, kind=item.kind, name=item.name, version=version,
                             blob=blobs[digest], summary=item.summary[:500], metadata=item.metadata,
                             step=item.step, created_by_role=item.role, approved=item.approved))
    return Artifact.objects.bulk_create(rows)


def latest(requirement: Requirement, kind: str, name: str | None = None) -> Artifact | None:
    rows = requirement.artifacts.filter(kind=kind)
    if name is not None:
        rows = rows.filter(name=name)
    return rows.select_related("blob").order_by("-created_at", "-version").first()


def content_json(artifact: Artifact) -> Any:
    return json.loads(artifact.blob.content)
