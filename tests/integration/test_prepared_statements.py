"""On PostgreSQL, parameters are bound by the server and a statement a connection runs 5 times is prepared:
planning, not running, was most of what a step's small queries cost. DATABASE_PREPARED_STATEMENTS=off goes
back to Django's default (client-side binding, nothing prepared) for a transaction-mode pooler."""
import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from lifecycle.models import Requirement, Step
from lifecycle.services import budget_gate, leases, scheduling

pytestmark = pytest.mark.django_db(transaction=True)


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_step_query_run_again_and_again_is_prepared_once_and_answers_the_same(acme_project):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project,
                                             title="prepared", brief="b", state="in_development")
    scheduling.step_schedule(requirement_id=requirement.pk, key="engineer:T1", attempt=1)
    step = Step.objects.get(requirement=requirement)
    lease = leases.Lease(step.pk, step.fence, requirement.pk, step.key, step.attempt)
    answers = {budget_gate.budget_admit_or_park(lease) for _ in range(7)}
    assert answers == {budget_gate.Allowance(True)}
    snapshot = [sql for sql in prepared_statements() if "budget_overrides" in sql and "lifecycle_project" in sql]
    assert len(snapshot) == 1 and "$1" in snapshot[0]  # bound by the server, prepared once


def settings_with(**env) -> dict:
    code = ("import json, django; django.setup(); from django.conf import settings; "
            "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "aiteam.settings", **env})
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_prepared_statements_are_on_for_postgresql_and_can_be_turned_off():
    url = os.environ["DATABASE_URL"]  # integration tests run only with a postgres:// DATABASE_URL
    assert settings_with(DATABASE_URL=url) == {"server_side_binding": True, "prepare_threshold": 5}
    assert settings_with(DATABASE_URL=url, DATABASE_PREPARED_STATEMENTS="off") == {}
