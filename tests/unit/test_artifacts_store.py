"""artifacts_store writes a step's artifacts in three statements however many there are, with the versions and
shared blobs that one artifact_store call after another would give."""
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.models import ArtifactBlob, Requirement
from lifecycle.services.artifacts import NewArtifact, artifact_store, artifacts_store, latest


def requirement_of(project) -> Requirement:
    return Requirement.objects.create(organization=project.organization, project=project, brief="b", title="t")


def test_each_name_gets_its_next_version_and_equal_contents_one_blob(acme_project):
    req = requirement_of(acme_project)
    artifact_store(req, kind="source_file", name="app.py", content="A = 1\n")
    with CaptureQueriesContext(connection) as queries:
        stored = artifacts_store(req, [NewArtifact("source_file", "app.py", "A = 2\n", "1 lines", {"attempt": 2}),
                                       NewArtifact("test_file", "tests/test_app.py", "A = 2\n"),
                                       NewArtifact("source_file", "app.py", {"b": 1, "a": [2]})])
    assert len(queries) == 3
    assert [(a.kind, a.name, a.version) for a in stored] == [
        ("source_file", "app.py", 2), ("test_file", "tests/test_app.py", 1), ("source_file", "app.py", 3)]
    assert stored[0].blob_id == stored[1].blob_id and ArtifactBlob.objects.count() == 3
    newest = latest(req, "source_file", "app.py")
    assert newest.version == 3 and newest.blob.content == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}'
    assert stored[0].metadata == {"attempt": 2} and stored[0].summary == "1 lines" and stored[2].metadata == {}


def test_a_blob_stored_before_is_shared_not_written_again(acme_project):
    first, second = requirement_of(acme_project), requirement_of(acme_project)
    kept = artifact_store(first, kind="review", name="r", content="same")
    again = artifacts_store(second, [NewArtifact("review", "r", "same")])[0]
    assert again.blob_id == kept.blob_id and again.version == 1 and ArtifactBlob.objects.count() == 1
    assert artifacts_store(second, []) == []
