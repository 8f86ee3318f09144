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
