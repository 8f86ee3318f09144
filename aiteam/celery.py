"""The Celery app. Configuration lives in Django settings under the CELERY_ namespace."""
import logging
import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiteam.settings")

app = Celery("aiteam")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _refuse_bad_settings(**kwargs) -> None:
    """Celery logs and swallows an Exception raised by a signal receiver: SystemExit stops the process."""
    from django.core.exceptions import ImproperlyConfigured

    from aiteam.startup import refuse_bad_settings

    try:
        refuse_bad_settings()
    except ImproperlyConfigured as exc:
        logging.getLogger(__name__).critical("%s", exc)
        raise SystemExit(1) from exc


@app.on_after_configure.connect
def _reuse_database_connections(sender: Celery, **kwargs) -> None:
    """Celery's Django fixup closes the DB connection around every task unless CELERY_DB_REUSE_MAX is set
    in Celery's own configuration (a Django setting of that name does not reach it through the namespace).
    Reconnecting costs several milliseconds a step; Django's CONN_HEALTH_CHECKS still drops a broken one."""
    from django.conf import settings

    sender.conf.CELERY_DB_REUSE_MAX = settings.WORKER_DB_REUSE_MAX
