"""gunicorn and Celery do not run manage.py's system checks: they run them themselves and refuse bad settings."""
import pytest
from celery.signals import beat_init, worker_init
from django.core.exceptions import ImproperlyConfigured

from aiteam.startup import refuse_bad_settings


def test_good_settings_start():
    refuse_bad_settings()


def test_an_unpriced_model_refuses_to_start(settings):
    settings.AITEAM_MODELS = {"fast": "claude-haiku-5-5", "strong": "mystery-1"}
    with pytest.raises(ImproperlyConfigured, match="aiteam.E003.*mystery-1"):
        refuse_bad_settings()


def test_a_worker_or_beat_with_bad_settings_exits(settings):
    from aiteam.celery import _refuse_bad_settings

    for signal in (worker_init, beat_init):
        assert any("_refuse_bad_settings" in repr(receiver) for _, receiver in signal.receivers), signal
    settings.AITEAM_MODELS = {"fast": "claude-haiku-5-5", "strong": "mystery-1"}
    with pytest.raises(SystemExit):  # an Exception would be logged and swallowed by Celery's signal dispatch
        _refuse_bad_settings()


def test_the_web_app_with_bad_settings_does_not_load(settings):
    import importlib

    import aiteam.wsgi

    settings.AITEAM_MODELS = {"fast": "claude-haiku-5-5", "strong": "mystery-1"}
    with pytest.raises(ImproperlyConfigured, match="mystery-1"):
        importlib.reload(aiteam.wsgi)


@pytest.mark.parametrize(("provider", "broker", "warned"), [
    ("anthropic", "", True), ("anthropic", "redis://127.0.0.1:6379/15", False), ("replay", "", False)])
def test_a_real_model_on_the_embedded_default_is_warned_of_at_start(settings, caplog, provider, broker, warned):
    """Each step runs inside the web request there: a model's answers outlast gunicorn's 30 s and the request fails."""
    settings.AITEAM_LLM_PROVIDER, settings.CELERY_BROKER_URL = provider, broker
    with caplog.at_level("WARNING", logger="aiteam.startup"):
        refuse_bad_settings()  # a warning: commands and the web app still start
    assert ("aiteam.W004) AITEAM_LLM_PROVIDER=anthropic with no CELERY_BROKER_URL" in caplog.text) is warned
