from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    name = "lifecycle"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from lifecycle import checks, runner, tasks  # noqa: F401  (register the system checks and the tasks)
        from lifecycle.handlers import HANDLERS
        from lifecycle.services.outbox import subscribe

        subscribe(HANDLERS)
