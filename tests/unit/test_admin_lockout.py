"""The admin's login locks out after AITEAM_LOGIN_FAILURE_LIMIT (5) failures for one username or from one address,
the right password included, until the cool-off has passed; passwords set by aiteam_user pass Django's validators."""
from datetime import timedelta
from io import StringIO

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.test import Client

from tests.conftest import api_for

pytestmark = pytest.mark.django_db
LOGIN = "/admin/login/"
PASSWORD = "correct horse battery staple"
ATTACKER, OFFICE = "192.0.2.66", "198.51.100.10"


@pytest.fixture(autouse=True)
def _fast_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a login costs milliseconds


@pytest.fixture
def staff_rita(rita):
    rita.is_staff = True
    rita.set_password(PASSWORD)
    rita.save()
    return rita


def log_in(username: str, password: str, address: str) -> tuple[int, Client]:
    client = Client()
    response = client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"}, REMOTE_ADDR=address)
    return response.status_code, client


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail(times: int, address: str, username: str = "rita") -> None:
    for n in range(times):
        status, _ = log_in(username.format(n=n), "wrong password", address)
        assert status in (200, 429)


def test_the_settings_lock_out_by_username_or_address(settings):
    assert settings.AXES_FAILURE_LIMIT == 5 and settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"] and settings.AXES_RESET_ON_SUCCESS


def test_after_five_failures_the_right_password_is_refused_for_that_user_from_anywhere(staff_rita):
    fail(40, ATTACKER)
    status, client = log_in("rita", PASSWORD, OFFICE)
    assert status == 429 and not logged_in(client)


def test_four_failures_leave_the_right_password_working(staff_rita):
    fail(4, ATTACKER)
    status, client = log_in("rita", PASSWORD, ATTACKER)
    assert status == 302 and logged_in(client)


def test_after_five_failures_from_an_address_nobody_logs_in_from_it(staff_rita):
    fail(5, ATTACKER, username="guess{n}")  # one failure per username: only the address reaches the limit
    status, client = log_in("rita", PASSWORD, ATTACKER)
    assert status == 429 and not logged_in(client)
    status, client = log_in("rita", PASSWORD, OFFICE)
    assert status == 302 and logged_in(client)


def test_the_lockout_ends_when_the_cool_off_has_passed(staff_rita):
    fail(5, ATTACKER)
    assert log_in("rita", PASSWORD, OFFICE)[0] == 429
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=16))
    status, client = log_in("rita", PASSWORD, OFFICE)
    assert status == 302 and logged_in(client)


def test_a_success_clears_the_count(staff_rita):
    fail(4, OFFICE)
    assert log_in("rita", PASSWORD, OFFICE)[0] == 302
    fail(4, OFFICE)
    assert log_in("rita", PASSWORD, OFFICE)[0] == 302


def test_the_api_token_and_an_admin_session_are_not_logins_and_keep_working(staff_rita):
    fail(5, ATTACKER)
    assert api_for(staff_rita).get("/api/v1/review-tasks/").status_code == 200
    session = Client()
    session.force_login(staff_rita)
    assert session.get("/admin/").status_code == 200
    assert session.get("/api/v1/review-tasks/").status_code == 200


def make_user(password: str, username: str = "carol") -> str:
    out = StringIO()
    call_command("aiteam_user", org="acme", username=username, role="reviewer", staff=True, password_stdin=True,
                 stdin=StringIO(password + "\n"), stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("password,reason", [
    ("Xy7!q", "too short"),
    ("password123", "too common"),
    ("4815162342", "entirely numeric"),
    ("carol2026", "too similar to the username"),
    ("", "too short"),
])
def test_aiteam_user_refuses_a_weak_password_in_one_line_and_creates_nothing(password, reason):
    with pytest.raises(CommandError) as caught:
        make_user(password)
    message = str(caught.value)
    assert message.startswith("--password-stdin: the password is refused:") and reason in message
    assert "\n" not in message
    assert not get_user_model().objects.filter(username="carol").exists()


def test_aiteam_user_sets_a_strong_password_that_logs_into_the_admin(db):
    assert make_user(PASSWORD).strip()  # the token, as ever
    status, client = log_in("carol", PASSWORD, OFFICE)
    assert status == 302 and logged_in(client)


def test_without_password_stdin_aiteam_user_reads_nothing_and_sets_no_password(db):
    out = StringIO()
    call_command("aiteam_user", org="acme", username="dave", role="reviewer", stdin=StringIO(PASSWORD), stdout=out)
    assert not get_user_model().objects.get(username="dave").check_password(PASSWORD)
