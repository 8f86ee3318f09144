"""The embedded default remote (a project without repo_url) is one bare repository per project: two tenants
whose slugs join to the same text must never push to each other's remote."""
from pathlib import Path

import pytest

from lifecycle.models import Requirement
from lifecycle.services.repositories import remote_url
from tests.factories import OrganizationFactory, ProjectFactory


@pytest.fixture
def remotes(settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    return settings.AITEAM_REMOTES_ROOT


def requirement_of(org_slug: str, project_slug: str) -> Requirement:
    project = ProjectFactory(organization=OrganizationFactory(slug=org_slug), slug=project_slug)
    return Requirement(organization=project.organization, project=project)  # unsaved: remote_url reads only these


@pytest.mark.django_db
def test_slugs_that_join_to_the_same_text_get_different_remotes(remotes):
    first, second = remote_url(requirement_of("a-b", "c")), remote_url(requirement_of("a", "b-c"))
    assert first != second
    assert all(remotes in Path(url).parents and Path(url, "HEAD").is_file() for url in (first, second))


@pytest.mark.django_db
def test_a_project_keeps_its_remote_and_a_configured_repo_url_wins(remotes):
    requirement = requirement_of("acme", "shop")
    assert remote_url(requirement) == remote_url(requirement)
    requirement.project.repo_url = "https://example.invalid/acme/shop.git"
    assert remote_url(requirement) == "https://example.invalid/acme/shop.git"
