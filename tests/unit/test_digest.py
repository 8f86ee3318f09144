"""The daily status digests: one requirement that cannot be digested costs the others nothing."""
import pytest

from lifecycle.services import digest
from lifecycle.services.artifacts import latest
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_requirement_that_fails_to_digest_does_not_stop_the_others(acme_project, rita, monkeypatch, caplog):
    broken, fine = (open_review(acme_project, title=t).requirement for t in ("Broken", "Fine"))
    real = digest.digest_facts

    def facts(requirement):
        if requirement.pk == broken.pk:
            raise ValueError("a bad value in the record")
        return real(requirement)

    monkeypatch.setattr(digest, "digest_facts", facts)
    before = {r.pk: latest(r, "status_digest").version for r in (broken, fine)}
    assert digest.digests_refresh_all() == 1
    assert latest(broken, "status_digest").version == before[broken.pk]
    assert latest(fine, "status_digest").version == before[fine.pk] + 1
    assert f"status digest of {broken.pk} failed" in caplog.text and "a bad value in the record" in caplog.text
