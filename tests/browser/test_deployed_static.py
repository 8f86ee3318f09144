"""The admin and the dashboard styled and scripted as a deployment serves them: gunicorn with DJANGO_DEBUG off, static
files collected (hashed, compressed) into DJANGO_STATIC_ROOT as `make serve` and the image do, nothing else in
front. The server is a subprocess on its own SQLite database, so these tests need no test database."""
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.xdist_group("deployed-server")  # one server, on one xdist worker
PASSWORD = "correct horse battery staple"
HASHED_BASE_CSS = re.compile(r"/static/admin/css/base\.[0-9a-f]{12}\.css")
ADMIN_SECONDARY = "rgb(65, 118, 144)"  # base.css: #header's background, var(--secondary) = #417690


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def wait_until_healthy(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, f"gunicorn exited:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not answer /healthz within 60 s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def deployed(tmp_path_factory):
    """gunicorn as the Procfile runs it, after migrate, collectstatic and createsuperuser (olivia, staff). Once per
    session, not per module: xdist may run another module's tests between this module's two (loadgroup keeps them
    on one worker, not together), and a module fixture was then built twice (11 s each)."""
    root = tmp_path_factory.mktemp("deployed")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "ANTHROPIC_API_KEY")}
    env.update(AITEAM_VAR_DIR=str(root / "var"), DJANGO_STATIC_ROOT=str(root / "static"), DJANGO_DEBUG="off",
               DJANGO_SECRET_KEY="browser-test-key", DJANGO_SUPERUSER_USERNAME="olivia",
               DJANGO_SUPERUSER_PASSWORD=PASSWORD, DJANGO_SUPERUSER_EMAIL="olivia@example.com")
    manage(env, "migrate", "-v0")
    manage(env, "collectstatic", "--noinput", "-v0")
    manage(env, "createsuperuser", "--noinput")
    url, log = f"http://127.0.0.1:{free_port()}", root / "gunicorn.log"
    with log.open("w") as output:
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "aiteam.wsgi", "--bind", url.removeprefix("http://"),
                                   "--workers", "1"], cwd=settings.BASE_DIR, env=env, stdout=output,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until_healthy(url, server, log)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


def fetch(url: str, **headers: str):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return response.status, response.headers, response.read()


def test_the_login_page_the_review_inbox_and_the_dashboard_are_styled_and_scripted(page, deployed):
    static = []
    page.on("response", lambda response: static.append(response) if "/static/" in response.url else None)
    page.goto(f"{deployed}/admin/login/")
    expect(page.locator("#header")).to_have_css("background-color", ADMIN_SECONDARY)
    page.fill("#id_username", "olivia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    page.get_by_role("link", name="Review inbox").click()
    expect(page.get_by_role("heading", name="Review inbox")).to_be_visible()
    expect(page.locator("#header")).to_have_css("background-color", ADMIN_SECONDARY)
    expect(page.locator(".inbox-quick")).to_have_css("display", "flex")  # lifecycle/static/lifecycle/inbox.css
    assert page.evaluate("typeof django === 'object' && typeof django.jQuery") == "function"  # the admin's scripts ran
    page.screenshot(path=str(ARTIFACTS / "deployed-review-inbox.png"), full_page=True)

    page.get_by_role("link", name="Dashboard").click()
    expect(page.locator(".kpis").first).to_have_css("display", "flex")
    page.get_by_role("link", name="meta-evaluation", exact=True).click()  # docs/meta-eval.md: charts drawn server-side
    expect(page.locator("#meta-kpis")).to_have_css("display", "flex")
    assert static and all(response.status == 200 for response in static), [(r.url, r.status) for r in static]
    assert any(HASHED_BASE_CSS.search(response.url) for response in static)
    assert any(response.url.endswith(".js") for response in static)


def test_collected_files_are_served_compressed_and_cached_for_good(deployed):
    status, _, login = fetch(f"{deployed}/admin/login/")
    hashed = HASHED_BASE_CSS.search(login.decode()).group()
    status, headers, body = fetch(f"{deployed}{hashed}", **{"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert "immutable" in headers["Cache-Control"]
    status, headers, body = fetch(f"{deployed}/static/admin/css/base.css")  # the plain name still answers
    assert status == 200 and headers["Content-Type"].startswith("text/css") and b"--header-bg" in body
