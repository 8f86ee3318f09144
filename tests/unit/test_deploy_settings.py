"""docker-compose.yml's web service passes `manage.py check --deploy` with no warning: AITEAM_BEHIND_TLS_PROXY turns on
secure cookies, HSTS, the https redirect and the proxy's X-Forwarded-Proto, while /healthz still answers the
compose healthcheck's plain-http probe. Each runs in a fresh process with the compose environment."""
import json
import os
import re
import secrets
import subprocess
import sys

import pytest
import yaml
from django.conf import settings

COMPOSE = settings.BASE_DIR / "docker-compose.yml"
DEPLOY_WARNINGS = ("security.W004", "security.W008", "security.W012", "security.W016")
# What SecurityMiddleware answers a request on /healthz and on the admin, over http and through the TLS proxy.
PROBE = """
import json, django
django.setup()
from django.http import HttpResponse
from django.middleware.security import SecurityMiddleware
from django.test import RequestFactory
from django.conf import settings
middleware, factory = SecurityMiddleware(lambda request: HttpResponse()), RequestFactory()
def answer(path, **headers):
    response = middleware(factory.get(path, HTTP_HOST="127.0.0.1:8000", **headers))
    return [response.status_code, response.get("Location"), response.get("Strict-Transport-Security")]
print(json.dumps({"healthz": answer("/healthz"), "admin": answer("/admin/login/"),
                  "admin_via_tls": answer("/admin/login/", HTTP_X_FORWARDED_PROTO="https"),
                  "secure_cookies": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE]}))
"""


def compose_environment(service: str = "web", **dotenv: str) -> dict[str, str]:
    """The service's environment as compose gives it: `${NAME:-default}` from .env (`dotenv`) or the default, and
    the secret key .env holds."""
    declared = yaml.safe_load(COMPOSE.read_text())["services"][service]["environment"]
    expand = lambda value: re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: dotenv.get(m[1], m[2]), str(value))
    return {name: expand(value) for name, value in declared.items()} | {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}


def run(environment: dict[str, str], tmp_path, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AITEAM_", "CELERY_", "DATABASE_", "DJANGO_"))}
    env = base | environment | {"AITEAM_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "aiteam.settings"}
    return subprocess.run([sys.executable, *args], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_compose_web_service_passes_check_deploy_without_a_warning(tmp_path):
    environment = compose_environment()
    assert environment["AITEAM_BEHIND_TLS_PROXY"] == "true"
    done = run(environment, tmp_path, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_without_the_switch_check_deploy_warns_as_the_probe_found(tmp_path):
    done = run(compose_environment(AITEAM_BEHIND_TLS_PROXY="false"), tmp_path, "manage.py", "check", "--deploy")
    assert all(warning in done.stderr + done.stdout for warning in DEPLOY_WARNINGS), done.stderr


def probe(environment: dict[str, str], tmp_path) -> dict:
    done = run(environment, tmp_path, "-c", PROBE)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_behind_the_proxy_http_is_redirected_but_the_healthcheck_and_tls_get_hsts(tmp_path):
    answers = probe(compose_environment(), tmp_path)
    assert answers["healthz"] == [200, None, None]  # the compose healthcheck's http://127.0.0.1:8000/healthz
    assert answers["admin"][:2] == [301, "https://127.0.0.1:8000/admin/login/"]
    status, _, hsts = answers["admin_via_tls"]
    assert status == 200 and hsts == "max-age=31536000; includeSubDomains; preload"
    assert answers["secure_cookies"] == [True, True]


@pytest.mark.parametrize("environment", [{}, {"AITEAM_BEHIND_TLS_PROXY": "false"}], ids=["embedded", "switch off"])
def test_without_the_switch_plain_http_is_served_as_before(environment, tmp_path):
    answers = probe(environment, tmp_path)
    assert answers["admin"] == [200, None, None] and answers["secure_cookies"] == [False, False]
