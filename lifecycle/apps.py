from django.apps import AppConfig


class LifecycleConfig(AppConfig):
    name = "lifecycle"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from lifecycle import checks  # noqa: F401  (registers system checks)
