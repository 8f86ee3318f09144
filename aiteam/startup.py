"""Processes that do not start through manage.py (gunicorn, Celery workers and beat) still refuse to start on
settings the system checks reject: step time budgets out of order, bad review policies, an unpriced model; and the
web app on static files it was told to serve collected but that never were. The checks' warnings (an ssh key that
is missing, say) are logged, as manage.py prints them."""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def refuse_bad_settings() -> None:
    from django.core import checks
    from django.core.exceptions import ImproperlyConfigured

    messages = checks.run_checks()
    for message in messages:
        if not message.is_serious() and not message.is_silenced():
            logger.warning("system check: %s", message)
    serious = [message for message in messages if message.is_serious()]
    if serious:
        raise ImproperlyConfigured("the system check failed:\n" + "\n".join(str(m) for m in serious))


def refuse_uncollected_static() -> None:
    """The web app only: with DJANGO_STATIC_ROOT set, every page links the hashed names collectstatic records, and
    a page linking a file the manifest lacks fails as a whole."""
    from django.conf import settings
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.core.exceptions import ImproperlyConfigured

    if settings.STATIC_COLLECTED and not staticfiles_storage.exists(staticfiles_storage.manifest_name):
        raise ImproperlyConfigured(f"DJANGO_STATIC_ROOT={settings.STATIC_ROOT} holds no collected static files: run "
                                   "`python manage.py collectstatic --noinput` with the same settings first")
