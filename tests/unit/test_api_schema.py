"""The OpenAPI schema describes the API as it answers: generated without a warning (every field typed, the
path ids as UUIDs, each `state` its own enum, what may be null nullable, every error status with its body), and
served to signed-in users only. tests/integration/test_api_schema_live.py checks it against a live server."""
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
    assert usage["calls"]["type"] == "integer" and usage["cost_usd"]["type"] == "number"  # as it is answered


def test_the_people_a_task_or_transition_may_lack_are_nullable(schema):
    schemas = schema["components"]["schemas"]
    for name in ("assignee", "assignee_group", "decided_by"):
        assert schemas["ReviewTaskOut"]["properties"][name]["nullable"], name
    assert schemas["TransitionOut"]["properties"]["actor_user"]["nullable"]


def test_routing_is_a_bare_list_without_page_parameters(schema):
    routing = schema["paths"]["/api/v1/requirements/{id}/routing/"]["get"]
    assert routing["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "array"
    assert {p["name"] for p in routing["parameters"]} == {"id", "route", "source"}


def test_pages_document_their_bounds(schema):
    params = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/requirements/"]["get"]["parameters"]}
    assert params["limit"] == {"type": "integer", "minimum": 1} and params["offset"] == {"type": "integer", "minimum": 0}


def responses(schema, method: str, path: str) -> set[str]:
    return set(schema["paths"][path][method]["responses"]) - {"429"}  # where throttled: the throttles' own tests


def test_every_error_an_operation_can_answer_is_documented_with_its_body(schema):
    assert responses(schema, "get", "/api/v1/requirements/") == {"200", "400", "401"}
    assert responses(schema, "get", "/api/v1/requirements/{id}/") == {"200", "400", "401", "404"}
    assert responses(schema, "post", "/api/v1/requirements/") == {  # 200: a live ticket
        "200", "201", "400", "401", "403", "413", "415", "422"}
    assert responses(schema, "post", "/api/v1/review-tasks/{id}/decision/") == {
        "200", "400", "401", "403", "404", "409", "413", "415"}
    for action in ("claim", "unassign"):  # no body read: neither 413 nor 415
        assert responses(schema, "post", f"/api/v1/review-tasks/{{id}}/{action}/") == {
            "200", "400", "401", "403", "404", "409"}
    assert responses(schema, "patch", "/api/v1/projects/{id}/") == {"200", "400", "401", "403", "404", "413", "415"}
    assert "409" in responses(schema, "post", "/api/v1/requirements/{id}/replay/")
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code.startswith("4"):
                    body = response["content"]["application/json"]["schema"]
                    assert body == {"$ref": "#/components/schemas/ErrorOut"}, (method, path, code)


def test_a_project_patch_takes_json_only_as_the_schema_says(schema):
    body = schema["paths"]["/api/v1/projects/{id}/"]["patch"]["requestBody"]["content"]
    assert set(body) == {"application/json"}


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "content_type"), [
    ("post", "/api/v1/requirements/", "text/plain"),
    ("post", "/api/v1/review-tasks/{task}/decision/", "text/plain"),
    ("patch", "/api/v1/projects/{project}/", "text/plain"),
    ("patch", "/api/v1/projects/{project}/", "application/x-www-form-urlencoded"),  # a form's "true" is a string
    ("patch", "/api/v1/projects/{project}/", "multipart/form-data; boundary=x"),
])
def test_a_body_in_a_content_type_the_operation_does_not_take_is_a_415(acme_project, rita, method, path, content_type):
    from tests.review_tasks import open_review

    url = path.format(task=open_review(acme_project).pk, project=acme_project.pk)
    response = getattr(api_for(rita), method)(url, "decision=approve", content_type=content_type)
    assert response.status_code == 415 and content_type in response.json()["detail"]


def test_ids_are_uuids_and_the_review_task_list_documents_its_state_filter(schema):
    decision = schema["paths"]["/api/v1/review-tasks/{id}/decision/"]["post"]
    (path_id,) = [p for p in decision["parameters"] if p["name"] == "id"]
    assert path_id["schema"]["format"] == "uuid"
    (state,) = [p for p in schema["paths"]["/api/v1/review-tasks/"]["get"]["parameters"] if p["name"] == "state"]
    assert "open" in state["schema"]["enum"] and "resolved" in state["schema"]["enum"]
    enums = schema["components"]["schemas"]
    assert {"RequirementStateEnum", "ReviewStateEnum", "StoryStateEnum"} <= set(enums)


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["offset=null", "offset=-1", "limit=0", "limit=ten"])
def test_a_page_parameter_out_of_its_bounds_is_a_400(alice, query):
    response = api_for(alice).get(f"/api/v1/requirements/?{query}")
    assert response.status_code == 400 and query.split("=")[0] in response.json()


@pytest.mark.django_db
def test_the_usage_cost_is_a_number_and_missing_people_are_null(acme_project, rita):
    from tests.review_tasks import open_review

    task = open_review(acme_project)
    detail = api_for(rita).get(f"/api/v1/requirements/{task.requirement_id}/").json()
    assert detail["llm_usage"]["cost_usd"] == 0 and isinstance(detail["llm_usage"]["cost_usd"], float)
    (open_task,) = detail["open_review_tasks"]
    assert (open_task["assignee"], open_task["assignee_group"], open_task["decided_by"]) == (None, None, None)


@pytest.mark.django_db
def test_the_schema_has_one_version_and_refuses_a_query_for_another(alice, settings):
    served = api_for(alice).get("/api/schema/", {"format": "json"})
    assert served.json()["info"]["version"] == settings.SPECTACULAR_SETTINGS["VERSION"]
    refused = api_for(alice).get("/api/schema/", {"version": "v" * 5000})
    assert refused.status_code == 400 and "vvv" not in refused.content.decode()
    assert refused["Content-Type"] == "application/json" and "one version" in refused.json()["version"][0]


@pytest.mark.django_db
def test_the_schema_is_served_to_signed_in_users_only(alice):
    anonymous = APIClient().get("/api/schema/")
    assert anonymous.status_code == 401 and anonymous["Content-Type"] == "application/json"  # an error: JSON
    assert api_for(alice).get("/api/schema/").status_code == 200
