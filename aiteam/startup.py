"""Processes that do not start through manage.py (gunicorn, Celery workers and beat) still refuse to start on
settings the system checks reject: step time budgets out of order, bad review policies, an unpriced model."""
from __future__ import annotations


def refuse_bad_settings() -> None:
    from django.core import checks
    from django.core.exceptions import ImproperlyConfigured

    serious = [message for message in checks.run_checks() if message.is_serious()]
    if serious:
        raise ImproperlyConfigured("the system check failed:\n" + "\n".join(str(m) for m in serious))
