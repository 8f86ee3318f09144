"""Migration 0014 gives each existing requirement the workspace commit its latest code or CI artifact recorded,
so aligning an existing workspace keeps its history; a requirement that never committed keeps ""."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = [("lifecycle", "0013_expect_one_row")], [("lifecycle", "0014_workspace_head")]


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_existing_requirements_get_the_commit_their_latest_artifact_recorded():
    apps = migrate(BEFORE)
    try:
        org = apps.get_model("lifecycle", "Organization").objects.create(name="o", slug="o")
        project = apps.get_model("lifecycle", "Project").objects.create(organization=org, name="p", slug="p")
        requirement = apps.get_model("lifecycle", "Requirement")
        coded = requirement.objects.create(organization=org, project=project, brief="b")
        fresh = requirement.objects.create(organization=org, project=project, brief="b")
        blob = apps.get_model("lifecycle", "ArtifactBlob").objects.create(sha256="0" * 64, content="x", size=1)
        artifact = apps.get_model("lifecycle", "Artifact")
        for version, (kind, metadata) in enumerate([("source_file", {"commit": "a" * 40}),
                                                    ("ci_config", {"commit": "b" * 40}),
                                                    ("runbook", {"commit": "c" * 40}),  # not a committing kind
                                                    ("test_report", {"ok": True})], start=1):
            artifact.objects.create(requirement=coded, kind=kind, name=kind, version=version, blob=blob,
                                    metadata=metadata)
        apps = migrate(AFTER)
        heads = dict(apps.get_model("lifecycle", "Requirement").objects.values_list("pk", "workspace_head"))
        assert heads == {coded.pk: "b" * 40, fresh.pk: ""}
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
