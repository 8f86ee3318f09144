"""Migration 0040: the idempotency keys stored on requirements move to a table of their own, each with its
requirement and the digest of the submission it made, so a repeat of an old key is still answered; and back."""
import pytest

from lifecycle.models import IdempotencyKey, Requirement
from lifecycle.services.intake import requirement_submit_once
from tests.migration_steps import migrate, migrate_to_latest

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("lifecycle", "0039_eval_hidden_error_suite_name")]
AFTER = [("lifecycle", "0040_idempotency_keys")]


@pytest.fixture(autouse=True)
def _latest_afterwards():
    yield
    migrate_to_latest()


def test_a_stored_key_is_replayed_after_the_migration_and_given_back_when_unapplied(alice, acme_project):
    old = migrate(BEFORE).get_model("lifecycle", "Requirement")
    made = old.objects.create(organization_id=acme_project.organization_id, project_id=acme_project.pk,
                              submitted_by_id=alice.pk, brief="A reading list", title="Reading list",
                              playbook="new_feature", idempotency_key="old-key")
    old.objects.create(organization_id=acme_project.organization_id, project_id=acme_project.pk, brief="no key")

    migrate(AFTER)
    migrate_to_latest()  # what 0040 moved stays; the services below need today's tables
    assert IdempotencyKey.objects.get().requirement_id == made.pk
    again = requirement_submit_once(user=alice, idempotency_key="old-key", brief="A reading list ",
                                    title="Reading list")
    assert (again.requirement.pk, again.replayed, Requirement.objects.count()) == (made.pk, True, 2)

    old = migrate(BEFORE).get_model("lifecycle", "Requirement")
    assert old.objects.get(pk=made.pk).idempotency_key == "old-key"
