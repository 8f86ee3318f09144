"""The Celery app. Configuration lives in Django settings under the CELERY_ namespace."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiteam.settings")

app = Celery("aiteam")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _reuse_database_connections(sender: Celery, **kwargs) -> None:
    """Celery's Django fixup closes the DB connection around every task unless CELERY_DB_REUSE_MAX is set
    in Celery's own configuration (a Django setting of that name does not reach it through the namespace).
    Reconnecting costs several milliseconds a step; Django's CONN_HEALTH_CHECKS still drops a broken one."""
    from django.conf import settings

    sender.conf.CELERY_DB_REUSE_MAX = settings.WORKER_DB_REUSE_MAX
