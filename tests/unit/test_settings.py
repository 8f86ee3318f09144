"""Settings: the timeout invariant, and loud failures on bad values."""
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from aiteam.env import env_bool, env_int
from aiteam.timeouts import StepTimeouts


def test_default_timeouts_are_in_order(settings):
    t = settings.STEP_TIMEOUTS
    assert t.problems() == []
    assert t.llm_worst_case < settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
    assert t.heartbeat < t.lease <= 60 < settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]


def test_sdk_timeout_times_retries_plus_backoff_fits_the_soft_limit(monkeypatch):
    monkeypatch.setenv("AITEAM_LLM_TIMEOUT_S", "300")
    problems = StepTimeouts.from_env().problems()
    assert problems and "LLM worst case" in problems[0] and "soft time limit" in problems[0]


def test_a_lease_longer_than_the_visibility_timeout_is_refused_by_the_system_check(settings):
    settings.STEP_TIMEOUTS = StepTimeouts(10, 0, 100, 200, 4000, 3600)
    with pytest.raises(Exception, match="step lease .* must be below visibility timeout"):
        call_command("check")


def test_a_lease_shorter_than_the_hard_limit_is_fine_since_running_steps_renew_it():
    assert StepTimeouts(10, 0, 100, 200, 60, 3600).problems() == []


def test_the_task_soft_limit_leaves_every_inline_step_its_whole_budget(settings):
    t = settings.STEP_TIMEOUTS
    assert t.inline_window > 0
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT == t.soft_time_limit + t.inline_window


def test_an_inline_window_that_pushes_past_the_hard_limit_is_refused():
    problems = StepTimeouts(10, 0, 100, 130, 200, 3600, inline_window=40).problems()
    assert problems == ["soft time limit plus the inline window (140s) must be below hard time limit (130s)"]


def test_env_helpers_fail_loudly(monkeypatch):
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "1.5")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env_bool("X_BOOL", False)
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env_int("X_INT", 1)


def test_steps_write_no_celery_results(settings):
    from lifecycle.runner import run_step

    assert run_step.ignore_result and settings.CELERY_TASK_IGNORE_RESULT and settings.CELERY_RESULT_BACKEND is None
    assert run_step.acks_late and run_step.reject_on_worker_lost
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1


def test_the_embedded_default_creates_its_var_directory_on_a_fresh_clone(tmp_path):
    import os
    import subprocess
    import sys

    from django.conf import settings as django_settings

    var = tmp_path / "fresh" / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    # --plan opens the database (reading what is applied) and applies nothing: the file is made, or the open fails
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--plan"], cwd=django_settings.BASE_DIR,
                          env={**env, "AITEAM_VAR_DIR": str(var)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (var / "aiteam.sqlite3").is_file()
