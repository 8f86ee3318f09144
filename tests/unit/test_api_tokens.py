"""API tokens: stored as a digest only, expiring, revocable, shown once (by the command and the admin), and the
plaintext tokens of rest_framework.authtoken converted at upgrade so their clients keep working."""
import hashlib
import importlib
import re
import secrets
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from lifecycle.api.authentication import ApiTokenAuthentication
from lifecycle.models import ApiToken
from lifecycle.services.tokens import default_expiry, token_issue
from tests.conftest import api_for, staff_client

pytestmark = pytest.mark.django_db
URL = "/api/v1/requirements/"
converted = importlib.import_module("lifecycle.migrations.0020_api_tokens")


def issue(user, **fields) -> tuple[ApiToken, str]:
    token = ApiToken(user=user, **{"name": "laptop", **fields})
    return token, token_issue(token=token)


def get(value: str, url: str = URL):
    client = api_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Token {value}")
    return client.get(url)


def row_text(token: ApiToken) -> str:
    """Every column of the stored row, as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table} WHERE id = %s", [token.pk])
        return " ".join(str(v) for v in cursor.fetchone())


def test_a_new_token_authenticates_its_user(alice):
    _, value = issue(alice)
    response = get(value)
    assert response.status_code == 200 and response.wsgi_request.user == alice


def test_the_stored_row_holds_a_digest_and_no_usable_value(alice):
    token, value = issue(alice)
    assert len(value) >= 43  # 32 random bytes
    assert value not in row_text(token)
    assert token.digest == hashlib.sha256(value.encode()).hexdigest() and token.prefix == value[:8]


def test_a_token_expires_after_the_configured_days(alice, settings):
    settings.AITEAM_TOKEN_TTL_DAYS = 7
    token, value = issue(alice)
    assert timedelta(days=7) - (token.expires_at - timezone.now()) < timedelta(minutes=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = get(value)
    assert response.status_code == 401 and response.json()["detail"] == "Token expired."


def test_a_revoked_token_gets_401_and_its_row_stays(alice, rita):
    token, value = issue(alice)
    _, other = issue(alice)
    client = staff_client(alice)
    client.post("/admin/lifecycle/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    response = get(value)
    assert response.status_code == 401 and response.json()["detail"] == "Token revoked."
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert get(other).status_code == 200  # only the selected one


def test_an_inactive_users_token_gets_401(alice):
    _, value = issue(alice)
    alice.is_active = False
    alice.save()
    assert get(value).status_code == 401


def test_last_used_is_written_at_most_once_a_minute(alice):
    token, value = issue(alice)
    assert token.last_used_at is None
    get(value)
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as again:
        get(value)
    assert not [q for q in again.captured_queries if q["sql"].startswith("UPDATE")]
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    get(value)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


@pytest.mark.parametrize("header", [
    "Token abc\x00def", "Token " + "a" * 42 + "\x00", "Token " + "é" * 43, "Token ../../etc/passwd" + "a" * 30,
    "Token " + "a" * 5000, "Token a b", "Token", "Bearer " + "a" * 43, "Token " + "a" * 43,
])
def test_garbage_in_the_header_gets_401_never_500(alice, header):
    issue(alice)
    client = api_for(None)
    response = client.get(URL, HTTP_AUTHORIZATION=header)
    # A NUL byte may be refused with 400 before authentication (aiteam/nul_bytes.py); never a server error.
    assert response.status_code == (400 if "\x00" in header and response.status_code == 400 else 401)


def test_the_authentication_class_refuses_a_nul_byte_before_any_query(alice):
    with CaptureQueriesContext(connection) as queries, pytest.raises(AuthenticationFailed):
        ApiTokenAuthentication().authenticate_credentials("abc\x00def" + "a" * 40)
    assert not queries.captured_queries


def test_the_command_prints_a_new_token_once_and_stores_its_digest(db):
    out = StringIO()
    call_command("aiteam_user", org="acme", username="bob", role="submitter", token_name="ci", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    value = lines[0]
    token = ApiToken.objects.get(user__username="bob")
    assert token.name == "ci" and token.matches(value) and value not in row_text(token)
    assert get(value).status_code == 200


def test_a_staff_member_sees_a_new_tokens_value_once_in_the_admin(alice, rita):
    client = staff_client(alice)
    page = client.post("/admin/lifecycle/apitoken/add/", {"name": "laptop", "expires_at_0": "", "expires_at_1": ""})
    assert page.status_code == 200
    token = ApiToken.objects.get(user=alice)
    value = page.context["value"]
    assert token.matches(value) and value in page.content.decode()
    assert get(value).status_code == 200
    for url in ("/admin/lifecycle/apitoken/", f"/admin/lifecycle/apitoken/{token.pk}/change/",
                f"/admin/lifecycle/apitoken/{token.pk}/history/"):
        assert value not in client.get(url).content.decode()


def add_in_admin(client, user, expires_at):
    when = timezone.localtime(expires_at)  # a superuser's form has the user field; a staff member's does not
    return client.post("/admin/lifecycle/apitoken/add/", {"name": "ci", "user": user.pk,
                                                          "expires_at_0": f"{when:%Y-%m-%d}",
                                                          "expires_at_1": f"{when:%H:%M:%S}"})


@pytest.mark.parametrize("persona", ["alice", "admin_user"])
def test_the_admin_refuses_an_expiry_beyond_the_ttl_with_an_error(persona, request, settings):
    settings.AITEAM_TOKEN_TTL_DAYS = 7
    user = request.getfixturevalue(persona)
    client = staff_client(user)  # a superuser too: the TTL is the operator's setting
    now = timezone.now()
    for too_late in (now + timedelta(days=7, minutes=5), now.replace(year=9999, month=12, day=31)):
        page = add_in_admin(client, user, too_late)
        assert page.status_code == 200 and "value" not in page.context
        [error] = page.context["adminform"].form.errors["expires_at"]
        latest = re.fullmatch(r"A token expires at most 7 days after it is issued \(AITEAM_TOKEN_TTL_DAYS\): "
                              r"(.+) at the latest\.", error).group(1)
        shown = timezone.make_aware(datetime.strptime(latest, "%Y-%m-%d %H:%M"))
        assert abs(shown - default_expiry(now)) < timedelta(minutes=2)
    assert not ApiToken.objects.exists()
    page = add_in_admin(client, user, now + timedelta(days=6))
    token = ApiToken.objects.get(user=user)
    assert token.matches(page.context["value"]) and token.expires_at == (now + timedelta(days=6)).replace(microsecond=0)


def test_staff_see_and_revoke_only_their_own_tokens(alice, rita):
    theirs, value = issue(rita, name="ritas")
    client = staff_client(alice)
    assert "ritas" not in client.get("/admin/lifecycle/apitoken/").content.decode()
    assert client.get(f"/admin/lifecycle/apitoken/{theirs.pk}/change/").status_code == 302  # "does not exist"
    client.post("/admin/lifecycle/apitoken/", {"action": "revoke", "_selected_action": [theirs.pk]})
    assert get(value).status_code == 200


def test_the_upgrade_converts_an_old_plaintext_token_and_deletes_it(alice):
    old_key = secrets.token_hex(20)  # rest_framework.authtoken's shape: 40 hex digits
    with connection.cursor() as cursor:
        cursor.execute('CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, "created" timestamp NOT NULL, '
                       '"user_id" integer NOT NULL)')
        cursor.execute('INSERT INTO authtoken_token ("key", "created", "user_id") VALUES (%s, %s, %s)',
                       [old_key, "2025-01-02 03:04:05", alice.pk])
    now = timezone.now()
    assert converted.convert_drf_tokens(connection, ApiToken, now=now, ttl_days=30) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
        cursor.execute("DROP TABLE authtoken_token")
    token = ApiToken.objects.get(user=alice)
    assert token.matches(old_key) and old_key not in row_text(token)
    assert token.created_at.year == 2025 and token.expires_at == now + timedelta(days=30)
    assert get(old_key).status_code == 200  # the client keeps its header until the token expires


def test_the_upgrade_does_nothing_where_the_old_table_never_was(db):
    assert converted.convert_drf_tokens(connection, ApiToken, now=timezone.now(), ttl_days=90) == 0
