"""Browser tests: Debian's Chromium driven by Playwright (no browser download)."""
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("AITEAM_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def pytest_collection_modifyitems(config, items):
    if shutil.which(CHROMIUM):
        return
    message = f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError(f"CI=true and {message}")
    for item in items:
        if "browser" in item.nodeid:
            item.add_marker(pytest.mark.skip(reason=message))


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop shares the test thread
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-final.png"), full_page=True)
    context.close()
