from django.urls import path

from lifecycle.webhooks.views import SOURCES, receive

urlpatterns = [path(f"{source}/<uuid:project_id>/", receive, {"source": source}, name=f"webhook-{source}")
               for source in SOURCES]
