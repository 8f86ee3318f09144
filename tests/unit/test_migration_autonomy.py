"""Migration 0030: a project's opt-in to autonomous deployments becomes its pre-authorization of
deployment_approval:approve, and back when it is unapplied."""
import pytest

from lifecycle.models import ActionPreauthorization
from tests.factories import ProjectFactory
from tests.migration_steps import migrate, migrate_to_latest

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("lifecycle", "0029_evals")]
AFTER = [("lifecycle", "0030_autonomy_as_preauthorization")]


@pytest.fixture(autouse=True)
def _latest_afterwards():
    """Back to the latest migrations: a later migration's tables, dropped going back to 0029, are there again for
    the tests that run after these on the same database."""
    yield
    migrate_to_latest()


def test_each_opted_in_project_gets_the_pre_authorization_and_unapplying_gives_the_opt_in_back(acme_project, acme):
    other = ProjectFactory(organization=acme, slug="other")
    old = migrate(BEFORE).get_model("lifecycle", "Project")
    old.objects.filter(pk=acme_project.pk).update(autonomous_deployments=True)

    migrate(AFTER)
    grant = ActionPreauthorization.objects.get()
    assert (grant.project_id, grant.action, grant.granted_by) == (acme_project.pk, "deployment_approval:approve", None)

    old = migrate(BEFORE).get_model("lifecycle", "Project")
    assert set(old.objects.filter(autonomous_deployments=True).values_list("pk", flat=True)) == {acme_project.pk}
    assert not old.objects.get(pk=other.pk).autonomous_deployments
    migrate(AFTER)
