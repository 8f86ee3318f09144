"""The README's screenshots: the review inbox, a review page and the staff dashboard, as a deployment serves them.

On a scratch SQLite database in a temporary directory (the embedded default, gates left to people): migrate,
collect the static files as `make serve` does (hashed, compressed, served by WhiteNoise), make a submitter (alice,
an API token) and a staff reviewer (rita, a password), start gunicorn on a free loopback port, submit the sample
brief over REST, and let Chromium (Playwright) log in as rita, approve in the admin and photograph the pages.
Nothing outside the temporary directory is touched but docs/*.png.

    make screenshots        # or: .venv/bin/python docs/screenshots.py
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PYTHON = sys.executable
CHROMIUM = os.environ.get("AITEAM_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # as tests/browser/conftest.py launches it
VIEWPORT = {"width": 1280, "height": 800}
SAMPLE = (ROOT / "agents/cassettes/sample_brief.md").read_text(encoding="utf-8").partition("\n")[2].strip()
# The same sample brief under three titles: the bundled cassette answers only that brief.
TITLES = ["Reading list service", "Reading list for the book club", "Reading list: pilot for the library",
          "Reading list for the school", "Reading list: second opinion"]


def main() -> None:
    if not shutil.which(CHROMIUM):
        sys.exit(f"screenshots need Chromium at {CHROMIUM} (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="aiteam-screenshots-") as var:
        env = _environment(var)
        _manage(env, "migrate", "-v0")
        _manage(env, "collectstatic", "--noinput", "-v0")
        token = _manage(env, "aiteam_user", "--org", "acme", "--username", "alice", "--role", "submitter").strip()
        _manage(env, "aiteam_user", "--org", "acme", "--username", "rita", "--role", "reviewer", "--staff")
        password = secrets.token_urlsafe(12)
        _manage(env, "shell", "-c", "from django.contrib.auth.models import User; u = User.objects.get(username='rita');"
                f" u.set_password({password!r}); u.email = 'rita@example.com'; u.save()")
        with _gunicorn(env) as url:
            for title in TITLES:
                _submit(url, token, title)
            _photograph(url, password)
    print("wrote", ", ".join(str(p.relative_to(ROOT)) for p in sorted(DOCS.glob("*.png"))))


def _environment(var: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "ANTHROPIC_API_KEY")}
    return {**env, "AITEAM_VAR_DIR": var, "DJANGO_STATIC_ROOT": str(Path(var) / "static"), "AITEAM_AUTONOMOUS": "0",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40), "AITEAM_LOG_LEVEL": "WARNING"}


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"manage.py {args[0]} failed:\n{done.stderr}")
    return done.stdout


@contextmanager
def _gunicorn(env: dict[str, str]):
    """The web process as Procfile runs it, on a free port (eager steps run inside its requests)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    web = subprocess.Popen([PYTHON, "-m", "gunicorn", "aiteam.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
                            "--timeout", "120"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url, web)
        yield url
    finally:
        web.terminate()
        web.wait(timeout=30)


def _wait_for(url: str, web: subprocess.Popen) -> None:
    for _ in range(100):
        if web.poll() is not None:
            sys.exit(f"gunicorn stopped:\n{web.stderr.read().decode()}")
        try:
            urllib.request.urlopen(f"{url}/admin/login/", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("gunicorn did not answer within 20 s")


def _submit(url: str, token: str, title: str) -> None:
    """What `curl -X POST /api/v1/requirements/` does in the README's quickstart."""
    request = urllib.request.Request(
        f"{url}/api/v1/requirements/", data=json.dumps({"brief": SAMPLE, "title": title}).encode(), method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert answer.status == 201, answer.status


def _photograph(url: str, password: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{url}/admin/login/")
        page.fill("#id_username", "rita")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.goto(f"{url}/admin/lifecycle/reviewtask/")
        page.click("#toggle-nav-sidebar")  # the admin remembers it closed: room for the inbox's columns
        _decide(page, url, TITLES[0], "Stories Approval")  # then the team designs, builds and tests it
        _decide(page, url, TITLES[0], "Deployment Approval")  # then the branch is delivered: deployed
        _decide(page, url, TITLES[1], "Stories Approval")  # its deployment approval waits in the inbox
        _open_task(page, url, TITLES[2], "Stories Approval")
        page.get_by_role("button", name="Claim").click()
        page.screenshot(path=str(DOCS / "review-page.png"))
        page.goto(f"{url}/admin/lifecycle/reviewtask/")
        page.screenshot(path=str(DOCS / "review-inbox.png"))
        page.goto(f"{url}/staff/dashboard/")
        page.screenshot(path=str(DOCS / "staff-dashboard.png"))
        browser.close()


def _open_task(page, url: str, title: str, kind: str) -> None:
    page.goto(f"{url}/admin/lifecycle/reviewtask/")
    page.locator("tr", has_text=title).get_by_role("link", name=kind).first.click()


def _decide(page, url: str, title: str, kind: str) -> None:
    _open_task(page, url, title, kind)
    page.get_by_role("button", name="approve").click()
    page.get_by_text("approve recorded").wait_for()


if __name__ == "__main__":
    main()
