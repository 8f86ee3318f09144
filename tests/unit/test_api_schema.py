"""The OpenAPI schema describes the API as it answers: generated without a warning (every field typed, the
path ids as UUIDs, each `state` its own enum), and served to signed-in users only."""
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.conftest import api_for


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("schema") / "schema.json"
    # raises on any warning
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(path))
    return json.loads(path.read_text())


def test_the_detail_names_the_type_of_each_computed_field(schema):
    detail = schema["components"]["schemas"]["RequirementOut"]["properties"]
    assert detail["llm_usage"]["allOf"][0]["$ref"].endswith("/LlmUsageOut")
    assert detail["open_review_tasks"]["type"] == "array"
    assert detail["open_review_tasks"]["items"]["$ref"].endswith("/ReviewTaskOut")
    assert detail["replay"] == {"allOf": [{"$ref": "#/components/schemas/ReplayOut"}], "nullable": True,
                                "readOnly": True}  # null on a requirement that is not a replay
    assert detail["requirement_doc"]["allOf"][0]["$ref"].endswith("/DocOut") and detail["requirement_doc"]["nullable"]
    usage = schema["components"]["schemas"]["LlmUsageOut"]["properties"]
    assert usage["calls"]["type"] == "integer" and usage["cost_usd"]["format"] == "decimal"


def test_ids_are_uuids_and_the_review_task_list_documents_its_state_filter(schema):
    decision = schema["paths"]["/api/v1/review-tasks/{id}/decision/"]["post"]
    (path_id,) = [p for p in decision["parameters"] if p["name"] == "id"]
    assert path_id["schema"]["format"] == "uuid"
    (state,) = [p for p in schema["paths"]["/api/v1/review-tasks/"]["get"]["parameters"] if p["name"] == "state"]
    assert "open" in state["schema"]["enum"] and "resolved" in state["schema"]["enum"]
    enums = schema["components"]["schemas"]
    assert {"RequirementStateEnum", "ReviewStateEnum", "StoryStateEnum"} <= set(enums)


@pytest.mark.django_db
def test_the_schema_is_served_to_signed_in_users_only(alice):
    assert APIClient().get("/api/schema/").status_code == 401
    assert api_for(alice).get("/api/schema/").status_code == 200
