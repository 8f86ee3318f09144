"""Static files come from the web process itself (WhiteNoise). Collected and hashed in a deployment: see
tests/browser/test_deployed_static.py; here, the tests' and a checkout's way, and the refusal to start half-collected."""
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from aiteam.startup import refuse_uncollected_static


def test_without_a_static_root_files_are_served_from_the_apps_under_their_plain_names(settings):
    assert not settings.STATIC_COLLECTED and not settings.DEBUG
    for path in ("/static/admin/css/base.css", "/static/lifecycle/inbox.css"):
        response = Client().get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"].startswith("text/css")


def test_the_web_app_refuses_to_start_on_a_static_root_never_collected(settings, tmp_path):
    settings.STATIC_COLLECTED, settings.STATIC_ROOT = True, tmp_path / "static"
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
    with pytest.raises(ImproperlyConfigured, match=r"holds no collected static files: run `python manage.py collectstatic"):
        refuse_uncollected_static()
