"""Rate limits on the API: per address for requests without valid credentials (bad tokens included), per user when
signed in, tighter per user on submissions; past a limit, 429 with Retry-After. Counts are shared by every web
process through Redis when there is one."""
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.conftest import api_for

pytestmark = pytest.mark.django_db
URL = "/api/v1/requirements/"
CONVERSATIONS = "/api/v1/conversations/"
REVIEW_TASKS = "/api/v1/review-tasks/"
NO_SUCH = "00000000-0000-0000-0000-000000000000"
LIMITS = {"anon": "60/min", "user": "600/min", "submit": "30/min"}


@pytest.fixture
def limits(settings):
    """Set some rates, the others as the defaults (tests/conftest.py sets them all high)."""
    def set_rates(**rates: str) -> None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LIMITS | rates}
    return set_rates


def assert_throttled(response) -> None:
    assert response.status_code == 429, (response.status_code, response.content)
    assert 0 < int(response["Retry-After"]) <= 60
    assert "throttled" in response.data["detail"]


def test_the_defaults_suit_a_team():
    assert settings_in({}, "settings.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']") == LIMITS


def test_a_signed_in_user_past_the_limit_gets_429_with_retry_after(limits, alice, rita):
    limits(user="3/min")
    client = api_for(alice)
    assert [client.get(URL).status_code for _ in range(3)] == [200, 200, 200]
    assert_throttled(client.get(URL))
    assert_throttled(client.get("/api/schema/"))  # every API view, the schema too
    assert api_for(rita).get(URL).status_code == 200  # counted per user


def test_requests_without_credentials_are_counted_per_address(limits):
    limits(anon="3/min")
    client = APIClient()
    assert [client.get(URL).status_code for _ in range(3)] == [401, 401, 401]
    assert_throttled(client.get(URL))
    assert client.get(URL, REMOTE_ADDR="192.0.2.9").status_code == 401


def test_a_flood_of_bad_tokens_gets_429_too(limits):
    limits(anon="5/min")
    answers = [APIClient().get(URL, HTTP_AUTHORIZATION=f"Token {n:043d}").status_code for n in range(8)]
    assert answers == [401] * 5 + [429] * 3


def test_a_good_token_is_not_slowed_by_a_flood_of_bad_ones_from_its_address(limits, alice):
    limits(anon="2/min")
    for _ in range(3):
        APIClient().get(URL, HTTP_AUTHORIZATION="Token not-a-token")
    assert api_for(alice).get(URL).status_code == 200


def test_submissions_have_their_own_tighter_limit(limits, alice, rita):
    limits(submit="2/min")
    client = api_for(alice)
    assert client.post(URL, {"brief": "A reading list with tags"}, format="json").status_code == 201
    assert client.post(URL, {}, format="json").status_code == 400  # refused input counts as well
    assert_throttled(client.post(URL, {"brief": "A reading list with tags"}, format="json"))
    assert_throttled(client.post(f"/api/v1/review-tasks/{'0' * 8}-0000-0000-0000-{'0' * 12}/decision/", {}, format="json"))
    assert client.get(URL).status_code == 200  # reading is not a submission
    assert api_for(rita).post(URL, {}, format="json").status_code == 400



def test_polling_a_conversations_messages_is_not_a_submission_but_asking_is(limits, rita):
    limits(submit="2/min")
    client = api_for(rita)
    conversation = client.post(CONVERSATIONS, {"text": "What is in flight?"}, format="json").json()["id"]
    messages = f"{CONVERSATIONS}{conversation}/messages/"
    assert [client.get(messages).status_code for _ in range(4)] == [200] * 4  # polled for the answer
    assert client.post(messages, {"text": "And which is oldest?"}, format="json").status_code == 201
    assert_throttled(client.post(messages, {"text": "And then?"}, format="json"))
    assert client.get(messages).status_code == 200


def test_deciding_an_action_request_counts_as_a_review_decision_does(limits, rita):
    limits(submit="1/min")
    client = api_for(rita)
    assert client.post(f"{REVIEW_TASKS}{NO_SUCH}/decision/", {}, format="json").status_code == 404
    for decision in ("approve", "reject"):
        assert_throttled(client.post(f"/api/v1/approvals/{NO_SUCH}/{decision}/", {}, format="json"))
    assert client.get("/api/v1/approvals/").status_code == 200

def test_a_claimed_forwarded_address_does_not_escape_the_limit(limits):
    limits(anon="2/min")
    answers = [APIClient().get(URL, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").status_code for n in range(3)]
    assert answers == [401, 401, 429]


def test_behind_a_proxy_clients_are_told_apart_by_the_address_it_forwards(limits, settings):
    limits(anon="2/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}

    def get(client_address: str) -> int:  # the client's own claim first, the proxy's entry last
        return APIClient().get(URL, REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"203.0.113.7, {client_address}").status_code

    assert [get("198.51.100.1") for _ in range(3)] == [401, 401, 429]
    assert get("198.51.100.2") == 401


def test_the_schema_documents_429_and_its_retry_after_on_every_operation(tmp_path):
    path = tmp_path / "schema.json"
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(path))
    operations = [(p, method, op) for p, item in json.loads(path.read_text())["paths"].items()
                  for method, op in item.items()]
    assert operations
    for path_, method, operation in operations:
        too_many = operation["responses"]["429"]
        assert too_many["headers"]["Retry-After"]["schema"] == {"type": "integer"}, (method, path_)
        assert too_many["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")


def settings_in(env: dict[str, str], expression: str):
    """A setting as a fresh process computes it from `env` (and nothing else of the test run's)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AITEAM_", "CELERY_", "DATABASE_"))}
    done = subprocess.run([sys.executable, "-c", "import json, django; django.setup(); from django.conf import settings; "
                           f"print(json.dumps({expression}, default=str))"], cwd=django_settings.BASE_DIR,
                          env={**base, "DJANGO_SETTINGS_MODULE": "aiteam.settings", **env}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 or not done.stdout, done.stdout
    return json.loads(done.stdout) if done.returncode == 0 else done.stderr


def test_counts_are_shared_through_the_brokers_redis_and_kept_in_memory_when_embedded():
    assert settings_in({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"}, "settings.CACHES")["default"] == {
        "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6379/15",
        "KEY_PREFIX": "aiteam-cache"}
    assert settings_in({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15", "AITEAM_CACHE_URL": "redis://cache:6379/3"},
                       "settings.CACHES")["default"]["LOCATION"] == "redis://cache:6379/3"
    assert settings_in({}, "settings.CACHES")["default"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"


def test_rates_are_set_from_the_environment_and_a_bad_one_stops_the_process():
    rates = settings_in({"AITEAM_THROTTLE_SUBMIT": "5/hour", "AITEAM_THROTTLE_ANON": "off"},
                        "settings.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']")
    assert rates == {"anon": None, "user": "600/min", "submit": "5/hour"}
    error = settings_in({"AITEAM_THROTTLE_USER": "lots"}, "1")
    assert "AITEAM_THROTTLE_USER='lots': expected a rate such as 60/min" in error


def test_a_cache_that_does_not_answer_lets_requests_through_instead_of_failing_them(limits, settings, alice):
    limits(user="3/min")
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}  # nothing listens there
    client = api_for(alice)
    assert [client.get(URL).status_code for _ in range(5)] == [200] * 5
